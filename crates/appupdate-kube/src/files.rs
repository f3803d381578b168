//! Every file the plugin reads, read through one bound: a plan file, a key file, a kubeconfig,
//! an endpoints file, a CA file, and standard input (`-`). A file larger than its kind's bound
//! — or one that never ends, such as `/dev/zero` or a pipe that keeps writing — is refused with
//! one line after at most the bound and one byte were read, never read into memory whole.
//!
//! | kind | bound | why that much |
//! | --- | --- | --- |
//! | plan file (`apply FILE`) | 128 MiB | a saved plan of 1 000 scope groups is about 40 MB, and a fleet's file holds one plan per cluster |
//! | endpoints file | 16 MiB | 10 000 endpoints are about 0.5 MB |
//! | kubeconfig (each file) | 16 MiB | a context with its certificates is a few KB |
//! | kuberc (kubectl's preferences) | 1 MiB | aliases, defaults and a credential plugin policy are a few KB |
//! | CA file (`--verify-url-ca`) | 4 MiB | the whole public web PKI's roots are about 0.2 MB |
//! | key file (`--sign-key`, `--verify-key`) | 64 KiB | a key is 16 bytes or more: `openssl rand -hex 32` makes 65 |
//!
//! The files a kubeconfig names (certificates, keys, token files, exec plugins) are read by
//! kube, not here.

use std::fmt;
use std::io::{self, Read};
use std::path::Path;

/// What a file is, which decides how much of it may be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Plan,
    Endpoints,
    Kubeconfig,
    /// kubectl's preferences file.
    Kuberc,
    Certificate,
    Key,
    /// A docker `config.json` (the image check's credentials).
    DockerConfig,
}

impl FileKind {
    /// The most bytes a file of this kind may hold.
    pub const fn limit(self) -> u64 {
        const MIB: u64 = 1024 * 1024;
        match self {
            FileKind::Plan => 128 * MIB,
            FileKind::Endpoints | FileKind::Kubeconfig => 16 * MIB,
            FileKind::Kuberc => MIB,
            FileKind::Certificate | FileKind::DockerConfig => 4 * MIB,
            FileKind::Key => 64 * 1024,
        }
    }

    fn what(self) -> &'static str {
        match self {
            FileKind::Plan => "a plan file",
            FileKind::Endpoints => "an endpoints file",
            FileKind::Kubeconfig => "a kubeconfig",
            FileKind::Kuberc => "a kuberc",
            FileKind::Certificate => "a CA file",
            FileKind::Key => "a key file",
            FileKind::DockerConfig => "a docker config",
        }
    }
}

/// A file over its kind's bound. Its text (the `io::Error`'s) says what to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLarge(pub FileKind);

impl fmt::Display for TooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "it is larger than {}, the most kubectl-appupdate reads of {}",
            size(self.0.limit()),
            self.0.what()
        )
    }
}

impl std::error::Error for TooLarge {}

fn size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    match bytes {
        b if b >= KIB * KIB && b.is_multiple_of(KIB * KIB) => format!("{} MiB", b / (KIB * KIB)),
        b if b >= KIB && b.is_multiple_of(KIB) => format!("{} KiB", b / KIB),
        b => format!("{b} bytes"),
    }
}

/// Whether `e` is a file refused for its size.
pub fn is_too_large(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<TooLarge>())
}

/// The bytes `reader` yields, refused once there are more than `kind` allows.
pub fn read_bounded_from(reader: impl Read, kind: FileKind) -> io::Result<Vec<u8>> {
    let limit = kind.limit();
    let mut bytes = Vec::new();
    // One byte past the bound tells a file of exactly the bound from a larger one.
    reader.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(io::ErrorKind::InvalidData, TooLarge(kind)));
    }
    Ok(bytes)
}

/// The bytes of the file at `path` (a file of that name: `-` is not standard input here).
/// A regular file whose size is over the bound is refused before anything is read.
pub fn read_bounded(path: &Path, kind: FileKind) -> io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    if let Ok(meta) = file.metadata()
        && meta.is_file()
        && meta.len() > kind.limit()
    {
        return Err(io::Error::new(io::ErrorKind::InvalidData, TooLarge(kind)));
    }
    read_bounded_from(file, kind)
}

/// [`read_bounded`] as UTF-8 text; `-` reads standard input.
pub fn read_text(path: &Path, kind: FileKind) -> io::Result<String> {
    let bytes = if path.as_os_str() == "-" {
        read_bounded_from(io::stdin().lock(), kind)?
    } else {
        read_bounded(path, kind)?
    };
    // The standard library's words, as `read_to_string` said them before the bound.
    String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_at_the_bound_is_read_and_one_byte_more_is_refused() {
        let limit = FileKind::Key.limit() as usize;
        let exact = vec![b'k'; limit];
        assert_eq!(
            read_bounded_from(&exact[..], FileKind::Key).unwrap().len(),
            limit
        );
        let over = vec![b'k'; limit + 1];
        let e = read_bounded_from(&over[..], FileKind::Key).unwrap_err();
        assert!(is_too_large(&e));
        assert_eq!(
            e.to_string(),
            "it is larger than 64 KiB, the most kubectl-appupdate reads of a key file"
        );
    }

    #[test]
    fn an_endless_source_is_refused_after_the_bound() {
        let e = read_bounded_from(io::repeat(0), FileKind::Endpoints).unwrap_err();
        assert!(is_too_large(&e));
        assert_eq!(
            e.to_string(),
            "it is larger than 16 MiB, the most kubectl-appupdate reads of an endpoints file"
        );
    }

    #[cfg(unix)]
    #[test]
    fn dev_zero_is_refused() {
        let e = read_bounded(Path::new("/dev/zero"), FileKind::Key).unwrap_err();
        assert!(is_too_large(&e), "{e}");
    }

    #[test]
    fn a_large_regular_file_is_refused_by_its_size() {
        let path = std::env::temp_dir().join(format!("appupdate-files-{}", std::process::id()));
        let f = std::fs::File::create(&path).unwrap();
        // Sparse: nothing of it is read.
        f.set_len(FileKind::Plan.limit() + 1).unwrap();
        let e = read_bounded(&path, FileKind::Plan).unwrap_err();
        assert_eq!(
            e.to_string(),
            "it is larger than 128 MiB, the most kubectl-appupdate reads of a plan file"
        );
        std::fs::write(&path, "é").unwrap();
        assert_eq!(read_text(&path, FileKind::Plan).unwrap(), "é");
        std::fs::write(&path, [0xff]).unwrap();
        assert_eq!(
            read_text(&path, FileKind::Plan).unwrap_err().to_string(),
            "stream did not contain valid UTF-8"
        );
        std::fs::remove_file(&path).unwrap();
    }
}
