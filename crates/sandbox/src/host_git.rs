//! Git on the host, over repositories a dataset's author wrote.
//!
//! A repository's own `.git/config` and `.git/info/attributes` can name commands (smudge and
//! textconv filters, an fsmonitor, hooks) that git runs while it reads the repository. So the
//! harness never runs git inside a dataset's repository: it copies the repository's objects
//! and references (plain files, links not followed) into a fresh repository of its own, with
//! no configuration but its object format, and runs git there with every configuration file
//! off (system, global, attributes), hooks off, no external protocol, and `--end-of-options`
//! before what the dataset names. A bundle or URL is cloned bare (no configuration comes
//! with a clone).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

/// The most memory (data: heap and private writable mappings; a pack git maps to read it is
/// not counted) one git process over a dataset's repository may take. git holds a whole
/// object to resolve a delta against it, and one thread per core does so at once: a small
/// pack of deltas between huge blobs could take any amount. Past the limit git fails, and
/// its error says it ran out of memory.
pub const GIT_DATA_LIMIT: u64 = 4 << 30;

/// Sets `limit` as the data limit (`RLIMIT_DATA`) of the process `c` starts.
fn limit_data(c: &mut Command, limit: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec the closure calls setrlimit only, which is
    // async-signal-safe, and touches no memory of the parent's but its own copy of `limit`.
    unsafe {
        c.pre_exec(move || {
            let r = libc::rlimit {
                rlim_cur: limit as libc::rlim_t,
                rlim_max: limit as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_DATA, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// git with nothing of the user's, the system's or a repository's configuration that could
/// run a command, within [`GIT_DATA_LIMIT`] of memory.
pub fn command(repo: Option<&Path>) -> Command {
    let mut c = Command::new("git");
    limit_data(&mut c, GIT_DATA_LIMIT);
    if let Some(repo) = repo {
        c.arg("-C").arg(repo);
    }
    c.args([
        "-c",
        "core.attributesFile=/dev/null",
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
        "-c",
        "core.autocrlf=false",
        "-c",
        "protocol.ext.allow=never",
    ])
    .env("GIT_CONFIG_NOSYSTEM", "1")
    .env("GIT_CONFIG_GLOBAL", "/dev/null")
    .env("GIT_ATTR_NOSYSTEM", "1")
    .env("GIT_NO_REPLACE_OBJECTS", "1")
    .env("GIT_TERMINAL_PROMPT", "0")
    .env_remove("GIT_DIR")
    .env_remove("GIT_WORK_TREE")
    .env_remove("GIT_CONFIG_PARAMETERS")
    .env_remove("GIT_EXTERNAL_DIFF");
    c
}

/// Runs `command(repo)` with `args`; its stdout, or an error with git's message.
pub fn run(repo: &Path, args: &[&str]) -> Result<Vec<u8>> {
    let out = command(Some(repo))
        .args(args)
        .output()
        .context("cannot run git on the host (is it installed?)")?;
    if !out.status.success() {
        bail!(
            "git {} in {}: {}",
            args.join(" "),
            repo.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// A git command whose standard output is read as it comes, never held whole; its standard
/// error goes to a temporary file, so neither pipe can fill and stall it.
pub struct Reading {
    child: std::process::Child,
    stdout: std::process::ChildStdout,
    stderr: std::fs::File,
    what: String,
}

/// Starts `command(repo)` with `args`, its output to be read from [`Reading::stdout`].
pub fn spawn_reading(repo: &Path, args: &[&str]) -> Result<Reading> {
    let stderr = tempfile::tempfile().context("cannot make a temporary file")?;
    let mut child = command(Some(repo))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(stderr.try_clone().context("cannot make a temporary file")?)
        .spawn()
        .context("cannot run git on the host (is it installed?)")?;
    let Some(stdout) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        bail!("git {}: no output pipe", args.join(" "));
    };
    Ok(Reading {
        child,
        stdout,
        stderr,
        what: format!("git {} in {}", args.join(" "), repo.display()),
    })
}

impl Reading {
    pub fn stdout(&mut self) -> &mut dyn std::io::Read {
        &mut self.stdout
    }

    /// Ends the command once its output was read (`read`: how the reading went). git's own
    /// failure comes first (a commit that does not exist), then the reader's; a command
    /// still writing when the reader stopped is killed.
    pub fn finish(mut self, read: Result<()>) -> Result<()> {
        use std::io::Read;
        if read.is_ok() {
            // What is left (a tar's padding) is drained; more than that is not waited for.
            let mut rest = Vec::new();
            let drained = (&mut self.stdout).take(1 << 20).read_to_end(&mut rest);
            if drained.is_err() || rest.len() >= 1 << 20 {
                let _ = self.child.kill();
            }
        } else {
            let _ = self.child.kill();
        }
        drop(self.stdout);
        let status = self
            .child
            .wait()
            .with_context(|| format!("{}: cannot wait for it", self.what))?;
        if status.code().is_some_and(|c| c != 0) {
            use std::io::Seek;
            let mut text = String::new();
            let _ = self.stderr.seek(std::io::SeekFrom::Start(0));
            let _ = (&mut self.stderr).take(64 << 10).read_to_string(&mut text);
            bail!("{}: {}", self.what, text.trim());
        }
        read?;
        if !status.success() {
            bail!("{}: {status}", self.what);
        }
        Ok(())
    }
}

/// [`run`] with `input` on its standard input (written beside the reading: neither side
/// waits on the other).
pub fn run_with_input(repo: &Path, args: &[&str], input: String) -> Result<Vec<u8>> {
    use std::io::Write;
    let mut child = command(Some(repo))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("cannot run git on the host (is it installed?)")?;
    let stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(input.as_bytes());
        }
    });
    let out = child
        .wait_with_output()
        .context("cannot run git on the host (is it installed?)")?;
    let _ = writer.join();
    if !out.status.success() {
        bail!(
            "git {} in {}: {}",
            args.join(" "),
            repo.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// [`run`] for output that may be large: at most `limit` bytes of it, read as it comes;
/// more is an error naming the limit (`what` says what the output is).
pub fn run_capped(repo: &Path, args: &[&str], limit: u64, what: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut reading = spawn_reading(repo, args)?;
    let mut out = Vec::new();
    let read = match reading.stdout().take(limit + 1).read_to_end(&mut out) {
        Err(e) => Err(anyhow::Error::new(e).context(format!("reading {what}"))),
        Ok(_) if out.len() as u64 > limit => Err(anyhow::anyhow!(
            "{what} is larger than {} MiB, the most the harness reads",
            limit >> 20
        )),
        Ok(_) => Ok(()),
    };
    reading.finish(read)?;
    Ok(out)
}

/// The repository folder of a dataset (a work tree with a `.git` folder, or a bare one)
/// copied into `cache_dir`, once per content of its references and objects.
pub fn import_folder(path: &Path, cache_dir: &Path) -> Result<PathBuf> {
    let git_dir = git_dir_of(path)?;
    let files = repository_files(&git_dir)?;
    let mut key = Sha256::new();
    key.update(path.as_os_str().as_encoded_bytes());
    for (rel, meta) in &files {
        use std::os::unix::fs::MetadataExt;
        // References by content, streamed (a dataset's `packed-refs` can be any size; it
        // was listed a regular file); objects are named by theirs.
        if !rel.starts_with("objects/")
            && let Ok(mut f) = std::fs::File::open(git_dir.join(rel))
        {
            use std::io::Read;
            let mut buf = vec![0u8; 64 << 10];
            while let Ok(n) = f.read(&mut buf)
                && n > 0
            {
                key.update(&buf[..n]);
            }
        }
        key.update(
            format!(
                "\0{rel}\0{}\0{}.{}",
                meta.len(),
                meta.mtime(),
                meta.mtime_nsec()
            )
            .as_bytes(),
        );
    }
    let key = hex::encode(key.finalize());
    cached(cache_dir, &format!("local-{}", &key[..16]), |copy| {
        copy_repository(&git_dir, &files, copy)
    })
}

/// `cache_dir/sources/name`, made by `make` in a temporary folder beside it and moved into
/// place whole, unless it is there already.
fn cached(cache_dir: &Path, name: &str, make: impl FnOnce(&Path) -> Result<()>) -> Result<PathBuf> {
    let sources = cache_dir.join("sources");
    let dest = sources.join(name);
    // The cache sits in the results folder: a link in it would have the source read from,
    // and written to, wherever it points.
    let cache = harness_store::confined::Confined::folder(cache_dir);
    cache.check(&dest.join("HEAD"))?;
    if dest.join("HEAD").is_file() {
        return Ok(dest);
    }
    cache.create_dir_all(&sources)?;
    let tmp = tempfile::Builder::new()
        .prefix(".fetch")
        .tempdir_in(&sources)
        .context("cannot make a temporary folder for a repository")?;
    let made = tmp.path().join("repo");
    make(&made)?;
    std::fs::rename(&made, &dest)
        .with_context(|| format!("{}: cannot move into place", dest.display()))?;
    Ok(dest)
}

/// A fresh bare repository at `copy` holding `files` of `git_dir`.
fn copy_repository(
    git_dir: &Path,
    files: &[(String, std::fs::Metadata)],
    copy: &Path,
) -> Result<()> {
    let format = object_format(git_dir);
    let init = command(None)
        .args(["init", "-q", "--bare", "--template="])
        .arg(format!("--object-format={format}"))
        .arg(copy)
        .output()
        .context("cannot run git on the host (is it installed?)")?;
    if !init.status.success() {
        bail!("git init: {}", String::from_utf8_lossy(&init.stderr).trim());
    }
    for (rel, _) in files {
        let to = copy.join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("{}: cannot create", parent.display()))?;
        }
        std::fs::copy(git_dir.join(rel), &to)
            .with_context(|| format!("{}: cannot copy", git_dir.join(rel).display()))?;
    }
    Ok(())
}

fn git_dir_of(path: &Path) -> Result<PathBuf> {
    let dot_git = path.join(".git");
    let meta = std::fs::symlink_metadata(&dot_git);
    match meta {
        Ok(m) if m.is_dir() => Ok(dot_git),
        Ok(_) => bail!(
            "{}: a .git that is not a folder (a link to a repository elsewhere) is not read",
            path.display()
        ),
        Err(_) if path.join("HEAD").is_file() && path.join("objects").is_dir() => {
            Ok(path.to_path_buf())
        }
        Err(_) => bail!("{}: not a git repository", path.display()),
    }
}

/// The object format a repository's configuration declares (read as text, never by git).
fn object_format(git_dir: &Path) -> &'static str {
    let config = std::fs::read_to_string(git_dir.join("config")).unwrap_or_default();
    let sha256 = config.lines().any(|l| {
        let l: String = l.chars().filter(|c| !c.is_whitespace()).collect();
        l.eq_ignore_ascii_case("objectformat=sha256")
    });
    if sha256 { "sha256" } else { "sha1" }
}

/// What a repository's content is: HEAD, packed-refs, refs/ and objects/ (regular files
/// only: links and `objects/info/alternates`, which points at other repositories, are not
/// taken), relative to the git folder.
fn repository_files(git_dir: &Path) -> Result<Vec<(String, std::fs::Metadata)>> {
    let mut out = Vec::new();
    for name in ["HEAD", "packed-refs"] {
        if let Ok(m) = std::fs::symlink_metadata(git_dir.join(name))
            && m.is_file()
        {
            out.push((name.to_string(), m));
        }
    }
    for top in ["refs", "objects"] {
        match std::fs::symlink_metadata(git_dir.join(top)) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!(
                "{}: {top} is not a folder (a link to another repository is not followed)",
                git_dir.display()
            ),
            Err(_) => continue,
        }
        let mut stack = vec![top.to_string()];
        while let Some(rel) = stack.pop() {
            let dir = git_dir.join(&rel);
            let Ok(listing) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in listing {
                let entry = entry.with_context(|| format!("{}: cannot list", dir.display()))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let child = format!("{rel}/{name}");
                let meta = std::fs::symlink_metadata(entry.path())
                    .with_context(|| format!("{}: cannot stat", entry.path().display()))?;
                if meta.is_dir() {
                    stack.push(child);
                } else if meta.is_file() && child != "objects/info/alternates" {
                    out.push((child, meta));
                }
            }
        }
    }
    if !out.iter().any(|(rel, _)| rel == "HEAD") {
        bail!("{}: not a git repository (no HEAD)", git_dir.display());
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Where [`clone`] keeps `source` in `cache_dir`.
fn clone_name(source: &str) -> String {
    hex::encode(Sha256::digest(source.as_bytes()))[..16].to_string()
}

/// The clone of `source` that [`clone`] made earlier, if it did: nothing is fetched.
pub fn cloned(source: &str, cache_dir: &Path) -> Option<PathBuf> {
    let dest = cache_dir.join("sources").join(clone_name(source));
    dest.join("HEAD").is_file().then_some(dest)
}

/// A bundle file or URL, cloned bare into `cache_dir` once.
pub fn clone(source: &str, cache_dir: &Path) -> Result<PathBuf> {
    cached(cache_dir, &clone_name(source), |repo| {
        let out = command(None)
            .args([
                // index-pack streams every whole blob over 1 MiB (hashes it, holds none).
                "-c",
                "core.bigFileThreshold=1m",
                "clone",
                "--quiet",
                "--bare",
                "--no-local",
                "--template=",
                "--",
            ])
            .arg(source)
            .arg(repo)
            .output()
            .context("cannot run git on the host (is it installed?)")?;
        if !out.status.success() {
            bail!(
                "git clone {source}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every git the harness runs over a dataset's repository has its memory limited.
    #[test]
    fn git_runs_within_its_data_limit() {
        let mut c = Command::new("sh");
        c.args(["-c", "ulimit -d"]);
        limit_data(&mut c, GIT_DATA_LIMIT);
        let out = c.output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            (GIT_DATA_LIMIT / 1024).to_string()
        );
        // Past its limit git fails, saying why (here 64 MB held under a 16 MiB limit).
        let mut c = command(None);
        limit_data(&mut c, 16 << 20);
        let mut child = c
            .args(["hash-object", "--stdin"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let _ = std::io::Write::write_all(&mut stdin, &vec![0u8; 64_000_000]);
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Out of memory"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
