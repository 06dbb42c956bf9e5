//! Agents installed from PyPI (`pypi` and `install` in agents.toml): the wheel is fetched on
//! the host, once, into the harness's cache (`pip install --no-deps --only-binary :all:
//! --target`), and the files the entry names are copied into the agent's image at its
//! build. Claude Code and Codex ship as single executables inside wheels
//! (`claude-agent-sdk`, `openai-codex-cli-bin`): no Node, no npm, no network in any
//! container.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// A pinned requirement and the files of it that go into the image.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PypiInstall {
    /// `name==version`: pinned, so an image is the same agent every time.
    pub requirement: String,
    /// (path inside the installed package folder, absolute path in the image); `.` is the
    /// whole folder.
    pub files: Vec<(String, String)>,
    /// `python`: the requirement is installed with its dependencies, as wheels for this
    /// Python version (x86_64 Linux), for the image's own interpreter of that version (a
    /// Python agent). Without it, the one wheel alone (an agent shipped as an executable).
    pub python: Option<String>,
    /// `leave_out`: top-level entries of the installed folder not put in the image
    /// (dependencies the agent's command never imports).
    pub leave_out: Vec<String>,
}

impl PypiInstall {
    /// The cache folder's name: the requirement, and the Python it was installed for.
    fn cache_name(&self) -> String {
        let mut name = self.requirement.replace("==", "-");
        if let Some(v) = &self.python {
            name.push_str(&format!("-py{v}"));
        }
        name
    }
}

/// Checks `python` and `leave_out` beside a `pypi` requirement.
pub fn with_python(
    mut install: PypiInstall,
    python: Option<String>,
    leave_out: Vec<String>,
    at: &str,
) -> Result<PypiInstall> {
    if let Some(v) = &python {
        let ok = v.split_once('.').is_some_and(|(a, b)| {
            a == "3" && !b.is_empty() && b.chars().all(|c| c.is_ascii_digit())
        });
        if !ok {
            bail!("{at}.python: {v:?} is not a Python version such as \"3.11\"");
        }
    }
    for name in &leave_out {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            bail!("{at}.leave_out: {name:?} is not a top-level name of the installed folder");
        }
    }
    install.python = python;
    install.leave_out = leave_out;
    Ok(install)
}

/// Checks a `pypi` requirement and its `install` table.
pub fn parse(requirement: &str, files: Vec<(String, String)>, at: &str) -> Result<PypiInstall> {
    let pinned = requirement.split_once("==").is_some_and(|(name, version)| {
        !name.is_empty()
            && !version.is_empty()
            && (name.chars().chain(version.chars()))
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    });
    if !pinned {
        bail!("{at}.pypi: {requirement:?} is not a pinned requirement (name==version)");
    }
    if files.is_empty() {
        bail!("{at}.install: names no file of {requirement} to put in the image");
    }
    for (from, to) in &files {
        let inside = from == "."
            || !from.is_empty()
                && !from.starts_with('/')
                && from
                    .split('/')
                    .all(|p| !p.is_empty() && p != "." && p != "..");
        if !inside {
            bail!("{at}.install: {from:?} is not a path inside the package");
        }
        if !to.starts_with('/') || to.split('/').any(|p| p == "..") || to.ends_with('/') {
            bail!("{at}.install: {to:?} is not an absolute file path in the image");
        }
    }
    Ok(PypiInstall {
        requirement: requirement.to_string(),
        files,
        ..PypiInstall::default()
    })
}

/// The folder the requirement is installed in (fetched now when the cache lacks it).
pub fn fetch(install: &PypiInstall, say: &dyn Fn(String)) -> Result<PathBuf> {
    let requirement = install.requirement.as_str();
    let dir = crate::app::cache_root()?
        .join("pypi")
        .join(install.cache_name());
    if dir.join(".complete").is_file() {
        return Ok(dir);
    }
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial)
        .with_context(|| format!("{}: cannot create", partial.display()))?;
    say(format!(
        "fetching {requirement} from PyPI into {} (one time)",
        dir.display()
    ));
    let mut pip = Command::new("python3");
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--only-binary",
        ":all:",
        "--disable-pip-version-check",
    ]);
    match &install.python {
        // Its dependencies too, as wheels for the image's Python (pip resolves them for
        // that version and platform, whatever the host's).
        Some(version) => {
            pip.args(["--python-version", version, "--implementation", "cp"]);
            for platform in [
                "manylinux2014_x86_64",
                "manylinux_2_17_x86_64",
                "manylinux_2_28_x86_64",
                "linux_x86_64",
                "any",
            ] {
                pip.args(["--platform", platform]);
            }
        }
        None => {
            pip.args(["--no-deps", "--no-compile"]);
        }
    }
    let out = pip
        .arg("--target")
        .arg(&partial)
        .arg(requirement)
        .output()
        .context("cannot run python3 -m pip (the host needs Python 3 with pip to install agents from PyPI)")?;
    if !out.status.success() {
        bail!(
            "pip could not install {requirement}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    std::fs::write(partial.join(".complete"), requirement)
        .with_context(|| format!("{}: cannot write", partial.display()))?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&partial, &dir)
        .with_context(|| format!("{}: cannot move into place", dir.display()))?;
    Ok(dir)
}

/// The image's build-context files for `install` (root/<path>), from `dir`: a named file
/// executable; `.` every file of the folder but those left out, executable where it is.
pub fn image_files(install: &PypiInstall, dir: &Path) -> Result<Vec<(String, Vec<u8>, u32)>> {
    let mut out = Vec::new();
    for (from, to) in &install.files {
        if from == "." {
            whole_folder(install, dir, to, &mut out)?;
            continue;
        }
        let path = dir.join(from);
        let bytes = std::fs::read(&path).with_context(|| {
            format!(
                "{}: not in {} (agents.toml's install names it)",
                path.display(),
                install.requirement
            )
        })?;
        out.push((format!("root{to}"), bytes, 0o755));
    }
    Ok(out)
}

/// Every file under `dir` (no link followed; `bin/`, whose scripts name the host's python,
/// and the cache's marker left out), as files under `to`.
fn whole_folder(
    install: &PypiInstall,
    dir: &Path,
    to: &str,
    out: &mut Vec<(String, Vec<u8>, u32)>,
) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // A package left out goes with its dist-info and bundled libraries ("numpy",
    // "numpy-2.4.6.dist-info", "numpy.libs").
    let skip = |name: &str| {
        let package = name.split(['-', '.']).next().unwrap_or(name);
        name == "bin" || name == ".complete" || install.leave_out.iter().any(|l| l == package)
    };
    let mut stack: Vec<PathBuf> = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("{}: cannot read", dir.display()))? {
        let e = e?;
        if !skip(&e.file_name().to_string_lossy()) {
            stack.push(e.path());
        }
    }
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.is_dir() {
            for e in std::fs::read_dir(&path)? {
                stack.push(e?.path());
            }
        } else if meta.is_file() {
            let rel = path
                .strip_prefix(dir)
                .context("a file outside its folder")?;
            let mode = if meta.permissions().mode() & 0o111 != 0 {
                0o755
            } else {
                0o644
            };
            let bytes =
                std::fs::read(&path).with_context(|| format!("{}: cannot read", path.display()))?;
            out.push((format!("root{to}/{}", rel.display()), bytes, mode));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_are_pinned_and_files_stay_inside() {
        let f = |a: &str, b: &str| vec![(a.to_string(), b.to_string())];
        assert!(
            parse(
                "claude-agent-sdk==0.2.189",
                f("a/b", "/usr/local/bin/c"),
                "x"
            )
            .is_ok()
        );
        for (req, files, says) in [
            ("claude-agent-sdk", f("a", "/b"), "pinned"),
            ("claude-agent-sdk>=1", f("a", "/b"), "pinned"),
            ("x==1; rm -rf /", f("a", "/b"), "pinned"),
            ("x==1", f("../a", "/b"), "inside the package"),
            ("x==1", f("/etc/passwd", "/b"), "inside the package"),
            ("x==1", f("a", "bin/c"), "absolute"),
            ("x==1", Vec::new(), "names no file"),
        ] {
            let e = parse(req, files, "agents.toml: agent.a")
                .unwrap_err()
                .to_string();
            assert!(e.contains(says) && e.contains("agent.a"), "{e}");
        }
    }
}
