//! What the code under test may not touch, and the sandbox user it runs as.
//!
//! A task's `protected` globs, the harness's default ones and the files its test and bench
//! commands name make one set of protected paths. A patch that reaches one is rejected on
//! the host ([`harness_core::patch`]); in the container the same set, as regular expressions, is
//! made root-owned and read-only while the code runs as [`RUN_UID`], and is verified after
//! every run (`container/programs/guard.py`). One regex syntax serves both sides: the translation below
//! only emits constructs that Rust's `regex` and Python's `re` read the same way.

use std::collections::BTreeSet;

use regex::Regex;
use serde::Serialize;

use harness_core::glob::{escape, glob_to_regex};
use harness_core::task::Task;

/// The unprivileged user that install, test and bench commands (and sample patches'
/// application) run as inside task containers.
pub const RUN_UID: u32 = 10001;
pub const RUN_GID: u32 = 10001;
pub const RUN_USER: &str = "harnessrun";
pub const RUN_HOME: &str = "/home/harnessrun";
/// `docker exec` user strings.
pub const RUN_AS: &str = "10001:10001";
pub const ROOT: &str = "0:0";
/// The warden: the unprivileged user the harness's own Python programs run as in every
/// container (root runs nothing but the harness's static supervisor once a container runs).
pub const WARDEN_UID: u32 = 10002;

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

    /// `config.json` for `container/programs/guard.py`, the same at image build and at run time.
    /// `extras` are the absolute paths of the harness's own files in the container;
    /// `disk_limit` is how much the tree and home may grow (bytes).
    pub fn guard_config(
        &self,
        extras: &[String],
        source_mtime: Option<u64>,
        disk_limit: i64,
    ) -> serde_json::Value {
        serde_json::json!({
            "uid": RUN_UID,
            "gid": RUN_GID,
            "user": RUN_USER,
            "home": RUN_HOME,
            "protected": self.rules.iter().map(|r| r.regex.clone()).collect::<Vec<_>>(),
            "script_dirs": self.script_dirs.iter().collect::<Vec<_>>(),
            "extras": extras,
            "source_mtime": source_mtime,
            "disk_limit": disk_limit,
        })
    }
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
