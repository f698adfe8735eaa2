//! The `bundle` binary: parse arguments, run the command, map the outcome to an exit code
//! (0 ok, 1 checked and rejected, 2 usage or I/O error).

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
