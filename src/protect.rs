//! What the code under test may not touch, and the sandbox user it runs as.
//!
//! A task's `protected` globs, the harness's default ones and the files its test and bench
//! commands name make one set of protected paths. A patch that reaches one is rejected on
//! the host ([`crate::patch`]); in the container the same set, as regular expressions, is
//! made root-owned and read-only while the code runs as [`RUN_UID`], and is verified after
//! every run (`harness/guard.py`). One regex syntax serves both sides: the translation below
//! only emits constructs that Rust's `regex` and Python's `re` read the same way.

use std::collections::BTreeSet;

use regex::Regex;
use serde::Serialize;

use crate::task::Task;

/// The unprivileged user that install, test and bench commands (and sample patches'
/// application) run as inside task containers.
pub const RUN_UID: u32 = 10001;
pub const RUN_GID: u32 = 10001;
pub const RUN_USER: &str = "harnessrun";
pub const RUN_HOME: &str = "/home/harnessrun";
/// `docker exec` user strings.
pub const RUN_AS: &str = "10001:10001";
pub const ROOT: &str = "0:0";

/// Protected in every task: files that change how tests are collected or what every Python
/// interpreter runs at start-up, whatever the code under test is.
pub const DEFAULT_PROTECTED: &[&str] = &[
    "conftest.py",
    "pytest.ini",
    "sitecustomize.py",
    "usercustomize.py",
    "*.pth",
];

/// Python's standard library modules (3.11's `sys.stdlib_module_names`, private ones
/// aside). A new `time.py` next to a script would be imported instead of the real module.
pub const STDLIB_MODULES: &[&str] = &[
    "abc",
    "aifc",
    "antigravity",
    "argparse",
    "array",
    "ast",
    "asynchat",
    "asyncio",
    "asyncore",
    "atexit",
    "audioop",
    "base64",
    "bdb",
    "binascii",
    "bisect",
    "builtins",
    "bz2",
    "cProfile",
    "calendar",
    "cgi",
    "cgitb",
    "chunk",
    "cmath",
    "cmd",
    "code",
    "codecs",
    "codeop",
    "collections",
    "colorsys",
    "compileall",
    "concurrent",
    "configparser",
    "contextlib",
    "contextvars",
    "copy",
    "copyreg",
    "crypt",
    "csv",
    "ctypes",
    "curses",
    "dataclasses",
    "datetime",
    "dbm",
    "decimal",
    "difflib",
    "dis",
    "distutils",
    "doctest",
    "email",
    "encodings",
    "ensurepip",
    "enum",
    "errno",
    "faulthandler",
    "fcntl",
    "filecmp",
    "fileinput",
    "fnmatch",
    "fractions",
    "ftplib",
    "functools",
    "gc",
    "genericpath",
    "getopt",
    "getpass",
    "gettext",
    "glob",
    "graphlib",
    "grp",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "http",
    "idlelib",
    "imaplib",
    "imghdr",
    "imp",
    "importlib",
    "inspect",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "keyword",
    "lib2to3",
    "linecache",
    "locale",
    "logging",
    "lzma",
    "mailbox",
    "mailcap",
    "marshal",
    "math",
    "mimetypes",
    "mmap",
    "modulefinder",
    "msilib",
    "msvcrt",
    "multiprocessing",
    "netrc",
    "nis",
    "nntplib",
    "nt",
    "ntpath",
    "nturl2path",
    "numbers",
    "opcode",
    "operator",
    "optparse",
    "os",
    "ossaudiodev",
    "pathlib",
    "pdb",
    "pickle",
    "pickletools",
    "pipes",
    "pkgutil",
    "platform",
    "plistlib",
    "poplib",
    "posix",
    "posixpath",
    "pprint",
    "profile",
    "pstats",
    "pty",
    "pwd",
    "py_compile",
    "pyclbr",
    "pydoc",
    "pydoc_data",
    "pyexpat",
    "queue",
    "quopri",
    "random",
    "re",
    "readline",
    "reprlib",
    "resource",
    "rlcompleter",
    "runpy",
    "sched",
    "secrets",
    "select",
    "selectors",
    "shelve",
    "shlex",
    "shutil",
    "signal",
    "site",
    "smtpd",
    "smtplib",
    "sndhdr",
    "socket",
    "socketserver",
    "spwd",
    "sqlite3",
    "sre_compile",
    "sre_constants",
    "sre_parse",
    "ssl",
    "stat",
    "statistics",
    "string",
    "stringprep",
    "struct",
    "subprocess",
    "sunau",
    "symtable",
    "sys",
    "sysconfig",
    "syslog",
    "tabnanny",
    "tarfile",
    "telnetlib",
    "tempfile",
    "termios",
    "textwrap",
    "this",
    "threading",
    "time",
    "timeit",
    "tkinter",
    "token",
    "tokenize",
    "tomllib",
    "trace",
    "traceback",
    "tracemalloc",
    "tty",
    "turtle",
    "turtledemo",
    "types",
    "typing",
    "unicodedata",
    "unittest",
    "urllib",
    "uu",
    "uuid",
    "venv",
    "warnings",
    "wave",
    "weakref",
    "webbrowser",
    "winreg",
    "winsound",
    "wsgiref",
    "xdrlib",
    "xml",
    "xmlrpc",
    "zipapp",
    "zipfile",
    "zipimport",
    "zlib",
    "zoneinfo",
];

/// A glob over '/'-separated repository paths, as a regex (`.gitignore`-like): a pattern
/// without a '/' matches a name at any depth (`test_*.py` protects `tests/test_a.py`), one
/// with a '/' is anchored at the repository root (a leading '/' only anchors); `*` and `?`
/// stay within one component, `**` crosses them, `[...]` and `{a,b}` as usual. A pattern
/// that matches a folder protects everything in it.
pub fn glob_to_regex(glob: &str) -> Result<String, String> {
    let trimmed = glob.trim();
    if trimmed.is_empty() {
        return Err("empty pattern".into());
    }
    let anchored = trimmed.trim_end_matches('/').contains('/');
    let body = trimmed.trim_start_matches('/').trim_end_matches('/');
    if body.is_empty() {
        return Err(format!("{glob:?} matches the whole repository"));
    }
    let mut re = String::from(if anchored { "^" } else { "^(?:.*/)?" });
    re.push_str(&translate(body)?);
    re.push_str("(?:/.*)?$");
    Ok(re)
}

const META: &str = ".+*?()|[]{}^$\\";

fn translate(body: &str) -> Result<String, String> {
    let chars: Vec<char> = body.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let mut in_braces = 0usize;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '*' if chars.get(i + 1) == Some(&'*') => {
                let at_start = i == 0 || chars[i - 1] == '/';
                let slash_after = chars.get(i + 2) == Some(&'/');
                if at_start && slash_after {
                    out.push_str("(?:.*/)?");
                    i += 3;
                } else {
                    out.push_str(".*");
                    i += 2;
                }
                continue;
            }
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            '[' => {
                let end = chars[i + 1..]
                    .iter()
                    .enumerate()
                    .skip(1)
                    .find(|(_, c)| **c == ']')
                    .map(|(j, _)| i + 1 + j)
                    .ok_or_else(|| format!("unclosed '[' in {body:?}"))?;
                out.push('[');
                for (k, &cc) in chars[i + 1..end].iter().enumerate() {
                    if k == 0 && (cc == '!' || cc == '^') {
                        out.push('^');
                    } else if cc == '-' || cc.is_alphanumeric() {
                        out.push(cc);
                    } else if cc == '/' {
                        return Err(format!("'/' inside [...] in {body:?}"));
                    } else {
                        out.push('\\');
                        out.push(cc);
                    }
                }
                out.push(']');
                i = end + 1;
                continue;
            }
            '{' => {
                in_braces += 1;
                out.push_str("(?:");
            }
            '}' if in_braces > 0 => {
                in_braces -= 1;
                out.push(')');
            }
            ',' if in_braces > 0 => out.push('|'),
            '\\' => {
                let next = chars
                    .get(i + 1)
                    .ok_or_else(|| format!("trailing '\\' in {body:?}"))?;
                push_literal(&mut out, *next);
                i += 2;
                continue;
            }
            c => push_literal(&mut out, c),
        }
        i += 1;
    }
    if in_braces > 0 {
        return Err(format!("unclosed '{{' in {body:?}"));
    }
    Ok(out)
}

fn push_literal(out: &mut String, c: char) {
    if META.contains(c) {
        out.push('\\');
    }
    out.push(c);
}

/// One rule of the protected set, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub pattern: String,
    /// "task", "default" or "command" (a file the test or a bench command names).
    pub from: &'static str,
    pub regex: String,
}

/// The protected set of one task, with the folders its scripts run from.
#[derive(Debug, Clone)]
pub struct Protection {
    pub rules: Vec<Rule>,
    compiled: Vec<Regex>,
    /// Folders (repository-relative, "" for the root) that hold a script the test or a
    /// bench runs: Python puts them first on `sys.path`.
    script_dirs: BTreeSet<String>,
}

impl Protection {
    /// The task's globs (already checked when the task was loaded), the defaults, and every
    /// file of the base tree that the test or a bench command names.
    pub fn for_task<'a>(task: &Task, base_files: impl IntoIterator<Item = &'a str>) -> Protection {
        let files: BTreeSet<&str> = base_files.into_iter().collect();
        let mut rules = Vec::new();
        let mut add = |pattern: &str, from: &'static str, regex: String| {
            if !rules.iter().any(|r: &Rule| r.regex == regex) {
                rules.push(Rule {
                    pattern: pattern.to_string(),
                    from,
                    regex,
                });
            }
        };
        for g in &task.protected {
            if let Ok(re) = glob_to_regex(g) {
                add(g, "task", re);
            }
        }
        for g in DEFAULT_PROTECTED {
            if let Ok(re) = glob_to_regex(g) {
                add(g, "default", re);
            }
        }
        let mut script_dirs = BTreeSet::from([String::new()]);
        let commands = std::iter::once(task.test_command.as_str())
            .chain(task.benches.iter().map(|b| b.command.as_str()));
        for command in commands {
            for word in command_words(command) {
                let path = word.trim_start_matches("./");
                if files.contains(path) {
                    add(path, "command", format!("^{}$", escape(path)));
                    script_dirs.insert(
                        path.rsplit_once('/')
                            .map(|(d, _)| d.to_string())
                            .unwrap_or_default(),
                    );
                }
            }
        }
        let compiled = rules
            .iter()
            .filter_map(|r| Regex::new(&r.regex).ok())
            .collect();
        Protection {
            rules,
            compiled,
            script_dirs,
        }
    }

    pub fn is_protected(&self, path: &str) -> bool {
        self.compiled.iter().any(|r| r.is_match(path))
    }

    /// The standard-library module a file at `path` would shadow: `X.py`, `X.*.so` or a
    /// package folder `X/` in the repository root or in a folder a test or bench script
    /// runs from (Python puts those first on `sys.path`).
    pub fn shadowed_stdlib(&self, path: &str) -> Option<&'static str> {
        for d in &self.script_dirs {
            let rest = if d.is_empty() {
                path
            } else {
                match path
                    .strip_prefix(d.as_str())
                    .and_then(|r| r.strip_prefix('/'))
                {
                    Some(r) => r,
                    None => continue,
                }
            };
            let module = match rest.split_once('/') {
                Some((package, _)) => package,
                None => match rest.strip_suffix(".py") {
                    Some(m) => m,
                    None if rest.ends_with(".so") => rest.split('.').next().unwrap_or(rest),
                    None => continue,
                },
            };
            if let Some(m) = STDLIB_MODULES.iter().copied().find(|s| *s == module) {
                return Some(m);
            }
        }
        None
    }

    /// `config.json` for `harness/guard.py`, the same at image build and at run time.
    pub fn guard_config(&self) -> serde_json::Value {
        serde_json::json!({
            "uid": RUN_UID,
            "gid": RUN_GID,
            "user": RUN_USER,
            "home": RUN_HOME,
            "protected": self.rules.iter().map(|r| r.regex.clone()).collect::<Vec<_>>(),
            "extras": crate::eval::HARNESS_FILES.iter().map(|f| format!("/{f}")).collect::<Vec<_>>(),
            "source_mtime": crate::docker::image::SOURCE_MTIME,
        })
    }
}

fn escape(path: &str) -> String {
    let mut out = String::new();
    for c in path.chars() {
        push_literal(&mut out, c);
    }
    out
}

/// The words of a shell command, roughly: split at blanks and shell operators, quotes off.
fn command_words(command: &str) -> Vec<String> {
    command
        .split(|c: char| c.is_whitespace() || ";&|()<>`".contains(c))
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(glob: &str, path: &str) -> bool {
        Regex::new(&glob_to_regex(glob).unwrap())
            .unwrap()
            .is_match(path)
    }

    #[test]
    fn globs_read_like_gitignore() {
        assert!(m("bench.py", "bench.py"));
        assert!(m("bench.py", "sub/bench.py"), "no '/': any depth");
        assert!(!m("bench.py", "xbench.py"));
        assert!(!m("bench.py", "bench.pyc"));
        assert!(m("test_*.py", "tests/test_a.py"));
        assert!(!m("test_*.py", "test_a/b.py"));
        assert!(!m("/test_*.py", "tests/test_a.py"), "leading '/' anchors");
        assert!(m("/test_*.py", "test_a.py"));
        assert!(m("tests/**", "tests/a/b/c.py"));
        assert!(
            m("tests", "tests/a/b/c.py"),
            "a folder protects its contents"
        );
        assert!(m("tests/", "tests/x.py"));
        assert!(
            m("tests/", "src/tests/x.py"),
            "a trailing / does not anchor"
        );
        assert!(m("**/fixtures/*.json", "a/b/fixtures/x.json"));
        assert!(m("**/fixtures/*.json", "fixtures/x.json"));
        assert!(!m("src/*.py", "src/a/b.py"), "'*' stays in one component");
        assert!(m("src/**/*.py", "src/a/b.py"));
        assert!(m("src/**/*.py", "src/b.py"));
        assert!(m("*.{pth,cfg}", "x/y.cfg"));
        assert!(m("data[0-9].txt", "data7.txt"));
        assert!(!m("data[!0-9].txt", "data7.txt"));
        assert!(
            m("a+b (1).py", "a+b (1).py"),
            "regex metacharacters are literal"
        );
        assert!(!m("a.py", "axpy"));
        assert!(glob_to_regex("").is_err());
        assert!(glob_to_regex("/").is_err());
        assert!(glob_to_regex("a[b").is_err());
        assert!(glob_to_regex("{a,b").is_err());
    }

    #[test]
    fn translated_regexes_mean_the_same_in_python() {
        // The guard in the container reads the same strings with Python's `re`.
        let Ok(out) = std::process::Command::new("python3")
            .arg("-c")
            .arg(
                "import json,re,sys\nfor p, path, want in json.load(sys.stdin):\n    got = re.match(p, path) is not None\n    assert got == want, (p, path, got)\nprint('ok')",
            )
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                let cases: Vec<(String, &str, bool)> = [
                    ("test_*.py", "tests/test_a.py"),
                    ("tests/**", "tests/a/b.py"),
                    ("*.{pth,cfg}", "x/y.cfg"),
                    ("data[!0-9].txt", "data7.txt"),
                    ("a+b (1).py", "a+b (1).py"),
                    ("src/*.py", "src/a/b.py"),
                    ("**/x", "x"),
                    ("conftest.py", "deep/er/conftest.py"),
                ]
                .iter()
                .map(|(g, p)| (glob_to_regex(g).unwrap(), *p, m(g, p)))
                .collect();
                if let Some(mut stdin) = child.stdin.take() {
                    stdin.write_all(serde_json::to_string(&cases).unwrap().as_bytes())?;
                }
                child.wait_with_output()
            })
        else {
            eprintln!("skipping: no python3 on the host");
            return;
        };
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "ok",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn command_words_find_scripts() {
        assert_eq!(
            command_words("cd x && python3 -m pytest 'tests/a b.py' -q; ./run.sh"),
            [
                "cd", "x", "python3", "-m", "pytest", "tests/a", "b.py", "-q", "./run.sh"
            ]
        );
    }
}
