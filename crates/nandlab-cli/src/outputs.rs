//! The files a command writes (`--json`, `--timeseries`, `trace convert -o`):
//! all checked before any work, all written atomically at the end.
//!
//! Why: a run can take hours, and an output that cannot be written used to
//! be discovered only after it (exit 2, hiding a finding's exit 1); an
//! output naming an input (`--json cfg.toml` with `--config cfg.toml`)
//! destroyed it; two outputs naming one file silently lost one of them.
//! So [`prepare`] runs before anything else: for every output it creates
//! the temporary file the output will be written to, in the output's own
//! directory (which proves the directory exists and is writable, and keeps
//! the final rename within one file system), and refuses an output that is
//! an input or another output. Two paths name the same file when their
//! canonical paths agree (the directory resolved, so `./a` and `a` agree
//! before `a` exists) or, for existing files, when their device and inode
//! agree (a hard or symbolic link). `-` is standard output, allowed once.
//!
//! At the end [`Output::write`] (or [`Output::file`] then
//! [`Output::commit`] for a streamed output) renames the temporary file
//! over the destination: a reader never sees a half-written report, and an
//! interrupted or failed command leaves the old file as it was. An output
//! that is a symbolic link is written to the file it points to, as a plain
//! write would. A temporary file not committed is removed when dropped
//! (not when the process is killed: then a `.nandlab-*.tmp` file may stay).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// One output file (or standard output), ready to be written.
#[derive(Debug)]
pub struct Output {
    option: &'static str,
    path: PathBuf,
    /// Where the content is renamed to (the link's target for a symbolic link).
    destination: PathBuf,
    /// `None` for standard output.
    temp: Option<tempfile::NamedTempFile>,
}

/// Where a path points: its canonical form and, when it exists, its file identity.
struct Identity {
    canonical: Option<PathBuf>,
    file: Option<(u64, u64)>,
}

#[cfg(unix)]
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn file_id(_: &Path) -> Option<(u64, u64)> {
    None
}

/// The canonical path of `path`, also when it does not exist yet (its
/// directory resolved, its name appended).
fn canonical(path: &Path) -> Option<PathBuf> {
    if let Ok(c) = std::fs::canonicalize(path) {
        return Some(c);
    }
    let name = path.file_name()?;
    let dir = directory_of(path);
    std::fs::canonicalize(dir).ok().map(|d| d.join(name))
}

fn identity(path: &Path) -> Identity {
    Identity { canonical: canonical(path), file: file_id(path) }
}

impl Identity {
    fn same(&self, other: &Identity) -> bool {
        (self.file.is_some() && self.file == other.file)
            || (self.canonical.is_some() && self.canonical == other.canonical)
    }
}

/// The directory a file path is in (`.` for a bare name).
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Check every output against the inputs and each other, and create each
/// one's temporary file; before any work. `inputs` are (how the user gave
/// it, e.g. `--config`, path); `outputs` are (option, path if given). The
/// result has one entry per output, in order.
pub fn prepare<const N: usize>(
    inputs: &[(&str, &Path)],
    outputs: [(&'static str, Option<&Path>); N],
) -> Result<[Option<Output>; N], String> {
    let given: Vec<(&'static str, &Path)> = outputs.iter().filter_map(|(o, p)| p.map(|p| (*o, p))).collect();
    let mut stdout: Option<&str> = None;
    let inputs: Vec<(&str, &Path, Identity)> = inputs.iter().map(|(what, p)| (*what, *p, identity(p))).collect();
    let mut seen: Vec<(&str, &Path, Identity)> = Vec::new();
    for &(option, path) in &given {
        if is_stdout(path) {
            if let Some(first) = stdout {
                return Err(format!(
                    "{first} - and {option} -: only one output can go to standard output; give the other a file"
                ));
            }
            stdout = Some(option);
            continue;
        }
        if path.is_dir() {
            return Err(format!("{option} {}: is a directory; give a file name", path.display()));
        }
        if path.file_name().is_none() {
            return Err(format!("{option} {}: not a file name", path.display()));
        }
        let id = identity(path);
        for (what, input, input_id) in &inputs {
            if id.same(input_id) {
                return Err(format!(
                    "{option} {}: the output is the input file {} ({what}); writing it would destroy the input; \
                     choose another output file",
                    path.display(),
                    input.display()
                ));
            }
        }
        for (other, other_path, other_id) in &seen {
            if id.same(other_id) {
                return Err(format!(
                    "{other} {} and {option} {} are the same file (one output would be lost); \
                     give each output its own file",
                    other_path.display(),
                    path.display()
                ));
            }
        }
        seen.push((option, path, id));
    }
    let mut prepared = Vec::with_capacity(N);
    for (option, path) in outputs {
        prepared.push(path.map(|p| open(option, p)).transpose()?);
    }
    Ok(prepared.try_into().expect("one entry per output"))
}

fn open(option: &'static str, path: &Path) -> Result<Output, String> {
    if is_stdout(path) {
        return Ok(Output { option, path: path.to_path_buf(), destination: path.to_path_buf(), temp: None });
    }
    // A symbolic link is written through, as a plain write would.
    let destination = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    };
    let dir = directory_of(&destination);
    let mut builder = tempfile::Builder::new();
    builder.prefix(".nandlab-").suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // What a plain File::create gives (the umask applies), not 0600.
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let temp = builder.tempfile_in(dir).map_err(|e| {
        format!("{option} {}: cannot create a file in the directory {}: {e}", path.display(), dir.display())
    })?;
    Ok(Output { option, path: path.to_path_buf(), destination, temp: Some(temp) })
}

impl Output {
    /// Whether this output is standard output (`-`).
    pub fn is_stdout(&self) -> bool {
        self.temp.is_none()
    }

    /// Write `bytes` as the whole content and put the file in place
    /// (standard output: print them).
    pub fn write(mut self, bytes: &[u8]) -> Result<(), String> {
        let written = match &mut self.temp {
            None => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes).and_then(|_| out.flush())
            }
            Some(t) => t.as_file_mut().write_all(bytes),
        };
        written.map_err(|e| self.error(e))?;
        self.commit()
    }

    /// A handle to stream the content into (standard output for `-`);
    /// [`Output::commit`] once it is finished and dropped.
    pub fn file(&self) -> Result<Box<dyn Write>, String> {
        match &self.temp {
            None => Ok(Box::new(std::io::stdout())),
            Some(t) => t.as_file().try_clone().map(|f: File| Box::new(f) as Box<dyn Write>).map_err(|e| self.error(e)),
        }
    }

    /// Put the written file in place: rename it over the destination.
    pub fn commit(self) -> Result<(), String> {
        let Some(temp) = self.temp else {
            return Ok(());
        };
        temp.as_file().sync_all().map_err(|e| format!("{} {}: cannot write: {e}", self.option, self.path.display()))?;
        temp.persist(&self.destination)
            .map(|_| ())
            .map_err(|e| format!("{} {}: cannot write: {}", self.option, self.path.display(), e.error))
    }

    fn error(&self, e: std::io::Error) -> String {
        format!("{} {}: cannot write: {e}", self.option, self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn an_output_is_written_only_when_committed() {
        let d = dir();
        let p = d.path().join("r.json");
        std::fs::write(&p, "old").unwrap();
        let [out] = prepare(&[], [("--json", Some(p.as_path()))]).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old", "nothing written before the end");
        out.unwrap().write(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        let leftovers = std::fs::read_dir(d.path()).unwrap().count();
        assert_eq!(leftovers, 1, "the temporary file was renamed");
    }

    #[test]
    fn an_output_naming_an_input_by_another_path_is_refused() {
        let d = dir();
        let input = d.path().join("cfg.toml");
        std::fs::write(&input, "x").unwrap();
        let other = d.path().join(".").join("cfg.toml");
        let e = prepare(&[("--config", input.as_path())], [("--json", Some(other.as_path()))]).unwrap_err();
        assert!(e.contains("--json") && e.contains("--config"), "{e}");
    }

    #[test]
    fn two_outputs_naming_one_file_not_yet_existing_are_refused() {
        let d = dir();
        let a = d.path().join("out");
        let b = d.path().join(".").join("out");
        let e = prepare(&[], [("--json", Some(a.as_path())), ("--timeseries", Some(b.as_path()))]).unwrap_err();
        assert!(e.contains("same file"), "{e}");
        let dash = Path::new("-");
        let e = prepare(&[], [("--json", Some(dash)), ("--timeseries", Some(dash))]).unwrap_err();
        assert!(e.contains("standard output"), "{e}");
    }

    #[test]
    fn an_uncommitted_output_leaves_no_file() {
        let d = dir();
        let p = d.path().join("r.json");
        let [out] = prepare(&[], [("--json", Some(p.as_path()))]).unwrap();
        drop(out);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }
}
