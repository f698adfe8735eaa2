//! The `bundle` binary: parse arguments, run the command, map the outcome to an exit code
//! (0 ok, 1 checked and rejected, 2 usage or I/O error). All of it is in the library.

fn main() -> std::process::ExitCode {
    agent_bundle::main()
}

/// mimalloc, not the system allocator: see its entry in Cargo.toml for why.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
