//! A bundle file given on the command line. A folder (an agent folder, most often) is refused
//! with what the command takes, instead of the `Is a directory` of the first read.

use std::path::Path;

/// `Err` with what to do when `path` is a folder: commands that read a bundle take a file.
pub fn refuse_folder(path: &Path) -> Result<(), String> {
    if !path.is_dir() {
        return Ok(());
    }
    Err(format!(
        "{} is a folder, not a bundle: this command takes a bundle file (`bundle pack {}` makes one; \
         `bundle check {}` checks an agent folder)",
        path.display(),
        path.display(),
        path.display()
    ))
}
