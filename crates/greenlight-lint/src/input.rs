//! Finding and reading the inputs of a run: files, directories (recursive `*.yaml`, `*.yml`,
//! `*.json`, `*.sh`, `*.bash` and files without an extension that start with an `sh`/`bash`
//! shebang) and `-` for stdin (shown as `<stdin>`).
//! Owns: decoding (UTF-8, or UTF-16 with a byte-order mark), skipping a Helm chart's
//! unrendered `templates/` with one note, skipping test directories found while walking with
//! one note, config excludes.
//! Must never: fail the run for a file that merely is not YAML — only a path that cannot be
//! read at all is an error (exit 2).

use crate::config::glob_match;
use crate::diagnostic::{Diagnostic, Note};
use crate::source::Source;
use crate::{MAX_FILE_BYTES, unreadable_source};
use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// Not a regular file (a FIFO, a device, a socket): reading it could block or never end.
    #[error("cannot read {path}: {reason}")]
    NotRegular { path: String, reason: String },
    #[error("`-` (stdin) may be given only once")]
    StdinTwice,
}

/// Directory names that hold tests, fixtures or archives rather than what a team deploys:
/// below a named directory, files under one of them are skipped unless tests are included.
pub const TEST_DIRS: &[&str] = &["testdata", "test", "tests", "e2e", "fixtures", "_archived"];

/// How paths are read.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Globs matched against the displayed path (`[lint] exclude`).
    pub exclude: Vec<String>,
    /// Also lint files under [`TEST_DIRS`] found while walking (`--include-tests`).
    pub include_tests: bool,
}

/// What reading the inputs produced.
#[derive(Debug, Default)]
pub struct Inputs {
    pub sources: Vec<Source>,
    /// GL000 diagnostics for files that are not text or are too large.
    pub unreadable: Vec<Diagnostic>,
    pub notes: Vec<Note>,
    /// Files not read because they lie in a test directory found while walking.
    pub skipped_tests: usize,
}

fn display(p: &Path) -> String {
    let s = p.to_string_lossy().replace('\\', "/");
    s.strip_prefix("./").map(str::to_string).unwrap_or(s)
}

/// Read every input as `greenlight lint` does by default: `exclude` globs are matched against
/// the displayed path, and test directories found while walking are skipped.
pub fn read_inputs(
    paths: &[String],
    exclude: &[String],
    stdin: &mut dyn Read,
) -> Result<Inputs, InputError> {
    let opts = ReadOptions {
        exclude: exclude.to_vec(),
        include_tests: false,
    };
    read_inputs_with(paths, &opts, stdin)
}

/// Read every input. A path named here is always read, whatever its name; below a named
/// directory, test directories are skipped (one note counts them) unless `include_tests`.
pub fn read_inputs_with(
    paths: &[String],
    opts: &ReadOptions,
    stdin: &mut dyn Read,
) -> Result<Inputs, InputError> {
    let exclude = opts.exclude.as_slice();
    let mut out = Inputs::default();
    let mut files: Vec<PathBuf> = Vec::new();
    let mut stdin_used = false;
    let mut walk = Walk {
        exclude,
        include_tests: opts.include_tests,
        files: Vec::new(),
        notes: Vec::new(),
        test_dirs: Vec::new(),
        test_files: 0,
        kustomizations: Vec::new(),
    };
    for p in paths {
        if p == "-" {
            if stdin_used {
                return Err(InputError::StdinTwice);
            }
            stdin_used = true;
            // Read up to one byte past the limit, never to the end (`/dev/zero` piped in).
            let buf = greenlight_files::read_stdin_bounded(&mut *stdin, MAX_FILE_BYTES).map_err(
                |source| InputError::Read {
                    path: "<stdin>".into(),
                    source,
                },
            )?;
            match buf {
                Some(buf) => push_text(&mut out, "<stdin>".into(), buf, true),
                None => out.unreadable.push(unreadable_source(
                    "<stdin>".into(),
                    format!("input is over the {MAX_FILE_BYTES} byte limit; not linted"),
                )),
            }
            continue;
        }
        let path = PathBuf::from(p);
        let meta = std::fs::metadata(&path).map_err(|source| InputError::Read {
            path: p.clone(),
            source,
        })?;
        if meta.is_dir() {
            if is_chart_templates(&path) {
                walk.notes.push(templates_note(&path));
                continue;
            }
            walk.dir(&path)?;
            files.append(&mut walk.files);
        } else if !exclude.iter().any(|g| glob_match(g, &display(&path))) {
            files.push(path);
        }
    }
    out.notes = std::mem::take(&mut walk.notes);
    if walk.test_files > 0 {
        out.notes.push(walk.tests_note());
    }
    out.skipped_tests = walk.test_files;
    if !walk.kustomizations.is_empty() {
        out.notes.push(walk.kustomize_note());
    }
    for path in files {
        let name = display(&path);
        // Only a regular file, and at most the limit: a FIFO named as an input would block,
        // `/dev/zero` would never end (greenlight_files).
        use greenlight_files::{FileError, Problem};
        let bytes = match greenlight_files::read_bounded(&path, MAX_FILE_BYTES, "input") {
            Ok(bytes) => bytes,
            Err(e) if matches!(e.problem, Problem::TooLarge(_)) => {
                let size = std::fs::metadata(&path).map_or(0, |m| m.len());
                out.unreadable.push(unreadable_source(
                    name,
                    format!(
                        "file is {size} bytes, over the {MAX_FILE_BYTES} byte limit for manifests; not linted"
                    ),
                ));
                continue;
            }
            Err(FileError {
                problem: Problem::Io(source),
                ..
            }) => return Err(InputError::Read { path: name, source }),
            Err(e) => {
                return Err(InputError::NotRegular {
                    path: name,
                    reason: e.reason(),
                });
            }
        };
        push_text(&mut out, name, bytes, false);
    }
    Ok(out)
}

fn push_text(out: &mut Inputs, name: String, bytes: Vec<u8>, stream: bool) {
    if bytes.len() as u64 > MAX_FILE_BYTES {
        out.unreadable.push(unreadable_source(
            name,
            format!("input is over the {MAX_FILE_BYTES} byte limit; not linted"),
        ));
        return;
    }
    match decode(bytes) {
        Ok(text) => out.sources.push(if stream {
            Source::stdin(text)
        } else {
            Source::new(name, text)
        }),
        Err(message) => out.unreadable.push(unreadable_source(name, message)),
    }
}

/// Text from the bytes of a file: UTF-8 with or without a byte-order mark, or UTF-16 (little-
/// or big-endian) with one, as editors on Windows save it. The mark is dropped, so it is not a
/// column of the first line. Anything else is the message of a GL000 error.
fn decode(bytes: Vec<u8>) -> Result<String, String> {
    if bytes.starts_with(&[0xff, 0xfe, 0, 0]) || bytes.starts_with(&[0, 0, 0xfe, 0xff]) {
        return Err("UTF-32 text (by its byte-order mark); not linted: save it as UTF-8".into());
    }
    let unit: fn([u8; 2]) -> u16 = match bytes.get(..2) {
        Some([0xff, 0xfe]) => u16::from_le_bytes,
        Some([0xfe, 0xff]) => u16::from_be_bytes,
        _ => {
            return match String::from_utf8(bytes) {
                Ok(mut text) => {
                    if text.starts_with('\u{feff}') {
                        text.drain(..3);
                    }
                    Ok(text)
                }
                Err(e) => Err(format!(
                    "not UTF-8 text (invalid byte at offset {}); not linted",
                    e.utf8_error().valid_up_to()
                )),
            };
        }
    };
    let body = &bytes[2..];
    if !body.len().is_multiple_of(2) {
        return Err(format!(
            "UTF-16 text (by its byte-order mark) of an odd number of bytes ({}); not linted",
            bytes.len()
        ));
    }
    let units = body.chunks_exact(2).map(|c| unit([c[0], c[1]]));
    let mut text = String::with_capacity(body.len());
    let mut offset = 2;
    for c in char::decode_utf16(units) {
        match c {
            Ok(c) => {
                text.push(c);
                offset += 2 * c.len_utf16();
            }
            Err(e) => {
                return Err(format!(
                    "not UTF-16 text (unpaired surrogate {:#06x} at offset {offset}); not linted",
                    e.unpaired_surrogate()
                ));
            }
        }
    }
    Ok(text)
}

/// A file without an extension whose first line is an `sh` or `bash` shebang (a script in
/// `bin/` or `scripts/`); only its first bytes are read.
fn starts_with_shell_shebang(path: &Path) -> bool {
    let mut head = [0u8; 128];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let text = String::from_utf8_lossy(&head[..n]);
    crate::kind::is_shell_shebang(&text)
}

/// A Helm chart's `templates/` directory: named `templates` with a `Chart.yaml` beside it.
fn is_chart_templates(dir: &Path) -> bool {
    dir.file_name().and_then(|n| n.to_str()) == Some("templates")
        && dir.join("..").join("Chart.yaml").is_file()
}

fn templates_note(templates: &Path) -> Note {
    let name = display(templates);
    let chart = templates
        .parent()
        .map(display)
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| ".".into());
    // In the chart's own directory the chart is found by its name; elsewhere it is named.
    let lint = if chart == "." {
        "greenlight lint -".to_string()
    } else {
        format!("greenlight lint --chart {chart} -")
    };
    Note {
        file: name.clone(),
        message: format!(
            "skipped {name}: an unrendered Helm chart template directory (Chart.yaml beside it); \
             lint the rendered output instead: `helm template {chart} | {lint}`"
        ),
    }
}

/// Walking named directories: the files found, the notes, and what the test-directory skip
/// left out.
struct Walk<'a> {
    exclude: &'a [String],
    include_tests: bool,
    files: Vec<PathBuf>,
    notes: Vec<Note>,
    /// Skipped test directories that held files to lint, in walking order.
    test_dirs: Vec<PathBuf>,
    test_files: usize,
    /// Walked directories that hold a kustomization, in walking order.
    kustomizations: Vec<PathBuf>,
}

impl Walk<'_> {
    fn dir(&mut self, dir: &Path) -> Result<(), InputError> {
        let rd = std::fs::read_dir(dir).map_err(|source| InputError::Read {
            path: display(dir),
            source,
        })?;
        let mut entries: Vec<(PathBuf, bool)> = Vec::new();
        for e in rd {
            let e = e.map_err(|source| InputError::Read {
                path: display(dir),
                source,
            })?;
            let ft = e.file_type().map_err(|source| InputError::Read {
                path: display(&e.path()),
                source,
            })?;
            let path = e.path();
            // Follow symlinks to files, but not to directories (no cycles).
            let is_dir = ft.is_dir();
            let is_file = ft.is_file() || (ft.is_symlink() && path.is_file());
            if is_dir || is_file {
                entries.push((path, is_dir));
            }
        }
        entries.sort();
        let is_chart = dir.join("Chart.yaml").is_file();
        if ["kustomization.yaml", "kustomization.yml", "Kustomization"]
            .iter()
            .any(|k| dir.join(k).is_file())
        {
            self.kustomizations.push(dir.to_path_buf());
        }
        for (path, is_dir) in entries {
            let name = display(&path);
            if self.exclude.iter().any(|g| glob_match(g, &name)) {
                continue;
            }
            let base = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if is_dir {
                if base == ".git" {
                    continue;
                }
                if base == "templates" && is_chart {
                    self.notes.push(templates_note(&path));
                    continue;
                }
                if !self.include_tests && TEST_DIRS.contains(&base) {
                    self.skip_tests(&path)?;
                    continue;
                }
                self.dir(&path)?;
            } else if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json" | "sh" | "bash")
            ) || (path.extension().is_none() && starts_with_shell_shebang(&path))
            {
                self.files.push(path);
            }
        }
        Ok(())
    }

    /// Count the files a test directory holds (as a walk that included tests would find
    /// them), and read none of them.
    fn skip_tests(&mut self, dir: &Path) -> Result<(), InputError> {
        let mut inner = Walk {
            exclude: self.exclude,
            include_tests: true,
            files: Vec::new(),
            notes: Vec::new(),
            test_dirs: Vec::new(),
            test_files: 0,
            kustomizations: Vec::new(),
        };
        inner.dir(dir)?;
        if !inner.files.is_empty() {
            self.test_files += inner.files.len();
            self.test_dirs.push(dir.to_path_buf());
        }
        Ok(())
    }

    /// Once per run: the kustomizations found are linted as written, and how to lint what
    /// they render instead.
    fn kustomize_note(&self) -> Note {
        let shown: Vec<String> = self.kustomizations.iter().map(|d| display(d)).collect();
        let shown: Vec<String> = shown
            .into_iter()
            .map(|d| if d.is_empty() { ".".into() } else { d })
            .collect();
        let n = shown.len();
        let examples = shown.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
        let more = if n > 3 { ", …" } else { "" };
        let dir = if n == 1 { shown[0].as_str() } else { "<dir>" };
        Note {
            file: shown[0].clone(),
            message: format!(
                "{n} director{} hold{} a kustomization ({examples}{more}): their files are linted \
                 as written (GL001 takes their `images` tag rewrites into account), not as \
                 kustomize renders them; to lint the rendered output with \
                 findings at their source lines, add `buildMetadata: [originAnnotations]` to the \
                 kustomization and run `kustomize build {dir} | greenlight lint \
                 --kustomize-root {dir} -` (or `kubectl kustomize {dir}`)",
                if n == 1 { "y" } else { "ies" },
                if n == 1 { "s" } else { "" },
            ),
        }
    }

    fn tests_note(&self) -> Note {
        let first = self
            .test_dirs
            .first()
            .map(|d| display(d))
            .unwrap_or_default();
        let dirs = self.test_dirs.len();
        let examples: Vec<String> = self.test_dirs.iter().take(3).map(|d| display(d)).collect();
        let more = if dirs > 3 { ", …" } else { "" };
        Note {
            file: first,
            message: format!(
                "skipped {} file(s) in {dirs} test director{} found while walking ({}{more}): \
                 directories named {} hold tests and fixtures, not what is deployed; lint them \
                 with --include-tests, `include-tests = true` under [lint] in .greenlight.toml, \
                 or by naming them on the command line",
                self.test_files,
                if dirs == 1 { "y" } else { "ies" },
                examples.join(", "),
                TEST_DIRS.join(", "),
            ),
        }
    }
}
