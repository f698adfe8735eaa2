//! Opening a bundle file given on the command line. A folder (an agent folder, most often) is
//! refused with what the command takes, instead of the `Is a directory` of the first read.

use std::fs::File;
use std::path::Path;

use crate::Error;

/// Opens `path` for reading as a bundle: a folder is a usage error that names the command for
/// folders.
pub fn open(path: &Path) -> Result<File, Error> {
    if path.is_dir() {
        return Err(Error::Usage(format!(
            "{} is a folder, not a bundle: this command takes a bundle file (`bundle pack {}` makes one; \
             `bundle check {}` checks an agent folder)",
            path.display(),
            path.display(),
            path.display()
        )));
    }
    File::open(path).map_err(|e| Error::io(path, e))
}
