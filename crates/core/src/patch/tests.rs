use super::*;

const DIFF: &str = "diff --git a/mod.py b/mod.py\nindex 1..2 100644\n--- a/mod.py\n+++ b/mod.py\n@@ -1 +1 @@\n-a\n+b\n";

fn prot(p: &str) -> bool {
    p == "bench.py" || p.starts_with("tests/")
}

fn none() -> BTreeSet<String> {
    BTreeSet::new()
}

fn chk(patch: &str) -> PatchCheck {
    check_with(patch, prot, &none())
}

#[track_caller]
fn rejected(patch: &str, needles: &[&str]) {
    match chk(patch) {
        PatchCheck::Rejected(why) => {
            for n in needles {
                assert!(why.contains(n), "{why:?} lacks {n:?}");
            }
        }
        other => panic!("not rejected: {other:?}\n{patch}"),
    }
}

#[track_caller]
fn ok(patch: &str, paths: &[&str]) {
    assert_eq!(
        chk(patch),
        PatchCheck::Ok(paths.iter().map(|p| p.to_string()).collect()),
        "{patch}"
    );
}

#[test]
fn empty_not_a_diff_and_oversize() {
    assert_eq!(chk(""), PatchCheck::Empty);
    assert_eq!(chk(" \n\t\r\n"), PatchCheck::Empty);
    for text in [
        "I fixed the bug by caching the lookup.\n",
        "Traceback (most recent call last):\n  File \"/usr/lib/x.py\", line 1, in <module>\nValueError\n",
        "commit 1234\nAuthor: x\n\n    Speed up mod.py\n---\n mod.py | 2 +-\n",
    ] {
        assert!(matches!(chk(text), PatchCheck::NotADiff(_)), "{text}");
    }
    // A header with nothing a tool would apply after it.
    assert!(
        matches!(chk("--- a/mod.py\n+++ b/mod.py\n"), PatchCheck::NotADiff(r) if r.contains("no hunk"))
    );
    let big = format!("{DIFF}{}", "+x\n".repeat(MAX_PATCH_BYTES / 3 + 1));
    rejected(&big, &["limit"]);
    rejected("--- a/x\0y\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", &["NUL"]);
}

#[test]
fn normalise_adds_the_last_newline() {
    assert_eq!(normalise("a\n"), Cow::Borrowed("a\n"));
    assert_eq!(normalise(""), Cow::Borrowed(""));
    assert_eq!(normalise("-a\n+b").as_ref(), "-a\n+b\n");
}

#[test]
fn parse_git_unified_and_renames() {
    let f = parse(DIFF);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].format, Format::Git);
    assert_eq!(f[0].kind, Kind::Modify);
    assert_eq!(f[0].old_path.as_deref(), Some("mod.py"));
    assert_eq!(f[0].raw_old.as_deref(), Some("a/mod.py"));
    assert_eq!(
        (f[0].old_mode, f[0].new_mode),
        (Some(0o100644), Some(0o100644))
    );
    assert_eq!(f[0].hunks.len(), 1);
    assert_eq!(f[0].hunks[0].body, 5..7);

    let plain = "--- a/x/y.py\t2024-01-01 10:00:00.000000000 +0000\n+++ b/x/y.py\t2024-01-02 10:00:00.000000000 +0000\n@@ -1 +1 @@\n-a\n+b\n";
    let f = parse(plain);
    assert_eq!(f[0].format, Format::Unified);
    assert_eq!(f[0].old_path.as_deref(), Some("x/y.py"));
    assert_eq!(f[0].raw_old.as_deref(), Some("a/x/y.py"));
    ok(plain, &["x/y.py"]);

    let rename = "diff --git a/old.py b/new.py\nsimilarity index 90%\nrename from old.py\nrename to new.py\n";
    let f = parse(rename);
    assert_eq!(f[0].kind, Kind::Rename);
    ok(rename, &["old.py", "new.py"]);
    let copy =
        "diff --git a/old.py b/new.py\nsimilarity index 100%\ncopy from old.py\ncopy to new.py\n";
    assert_eq!(parse(copy)[0].kind, Kind::Copy);

    let created = "diff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+x\n";
    let f = parse(created);
    assert_eq!(
        (f[0].kind, f[0].old_path.clone(), f[0].new_mode),
        (Kind::Create, None, Some(0o100644))
    );
    ok(created, &["n.py"]);
    let deleted = "diff --git a/n.py b/n.py\ndeleted file mode 100644\n--- a/n.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n";
    let f = parse(deleted);
    assert_eq!((f[0].kind, f[0].new_path.clone()), (Kind::Delete, None));

    let quoted = "diff --git \"a/sp ace.py\" \"b/sp ace.py\"\n--- \"a/sp ace.py\"\n+++ \"b/sp ace.py\"\n@@ -1 +1 @@\n-a\n+b\n";
    ok(quoted, &["sp ace.py"]);
    let spaces = "diff --git a/sp ace.py b/sp ace.py\n--- a/sp ace.py\t\n+++ b/sp ace.py\t\n@@ -1 +1 @@\n-a\n+b\n";
    ok(spaces, &["sp ace.py"]);
    let octal = "diff --git \"a/caf\\303\\251.py\" \"b/caf\\303\\251.py\"\n--- \"a/caf\\303\\251.py\"\n+++ \"b/caf\\303\\251.py\"\n@@ -1 +1 @@\n-a\n+b\n";
    ok(octal, &["café.py"]);
    // Bytes that are not UTF-8 in a quoted name: refused, never shown as something else.
    let latin1 = "diff --git \"a/x\\377/tox.ini\" \"b/x\\377/tox.ini\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/x\\377/tox.ini\"\n@@ -0,0 +1 @@\n+[pytest]\n";
    rejected(latin1, &["is not UTF-8"]);
}

#[test]
fn two_files_and_no_newline_markers() {
    let two = format!(
        "{DIFF}\\ No newline at end of file\n{}",
        DIFF.replace("mod.py", "other.py")
    );
    let f = parse(&two);
    assert_eq!(f.len(), 2);
    assert_eq!(f[1].new_path.as_deref(), Some("other.py"));
    ok(&two, &["mod.py", "other.py"]);
    // Two hunks of one file.
    let hunks = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n x\n-a\n+b\n@@ -10 +10 @@\n-c\n+d\n";
    assert_eq!(parse(hunks)[0].hunks.len(), 2);
}

#[test]
fn crlf_names_lose_the_cr() {
    let crlf = DIFF.replace('\n', "\r\n");
    let f = parse(&crlf);
    assert_eq!(f[0].new_path.as_deref(), Some("mod.py"));
    ok(&crlf, &["mod.py"]);
    rejected(
        &crlf.replace("mod.py", "bench.py"),
        &["bench.py", "protected"],
    );
}

#[test]
fn any_first_component_is_stripped() {
    for (a, b) in [("x", "y"), ("foo", "bar"), ("a", "b"), ("", "")] {
        let p = format!("--- {a}/bench.py\n+++ {b}/bench.py\n@@ -1 +1 @@\n-a\n+b\n");
        rejected(&p, &["bench.py"]);
        let g = format!(
            "diff --git {a}/bench.py {b}/bench.py\n--- {a}/bench.py\n+++ {b}/bench.py\n@@ -1 +1 @@\n-a\n+b\n"
        );
        rejected(&g, &["bench.py"]);
    }
    assert_eq!(
        parse("--- x/bench.py\n+++ y/bench.py\n@@ -1 +1 @@\n-a\n+b\n")[0]
            .new_path
            .as_deref(),
        Some("bench.py")
    );
}

#[test]
fn protected_paths_under_every_reading() {
    let cases = [
        // git guesses -p0 for slash-less names.
        "--- bench.py\n+++ bench.py\n@@ -1 +1 @@\n-a\n+b\n",
        // GNU patch collapses the slash run; git reads "/bench.py".
        "--- a//bench.py\n+++ b//bench.py\n@@ -1 +1 @@\n-a\n+b\n",
        // git takes a quote it cannot decode literally.
        "--- \"a/bench.py\n+++ \"b/bench.py\n@@ -1 +1 @@\n-a\n+b\n",
        "--- \"a/\\142ench.py\"\n+++ \"b/\\142ench.py\"\n@@ -1 +1 @@\n-a\n+b\n",
        "--- a/./bench.py\n+++ b/./bench.py\n@@ -1 +1 @@\n-a\n+b\n",
        // GNU patch reads indented headers ('X' counts as indentation).
        "X--- a/bench.py\nX+++ b/bench.py\nX@@ -1 +1 @@\nX-a\nX+b\n",
        "  --- a/bench.py\n  +++ b/bench.py\n  @@ -1 +1 @@\n  -a\n  +b\n",
        "Index: a/bench.py\n@@ -1 +1 @@\n-a\n+b\n",
        "*** a/bench.py\n--- b/bench.py\n***************\n*** 1 ****\n! a\n--- 1 ----\n! b\n",
        "Index: a/bench.py\n1c1\n< a\n---\n> b\n",
        // GNU patch picks among old/new names: the other one may be used.
        "--- a/mod.py\n+++ b/bench.py\n@@ -1 +1 @@\n-a\n+b\n",
        "+++ b/bench.py\n--- a/mod.py\n@@ -1 +1 @@\n-a\n+b\n",
        // GNU renames with the diff --git names, git with rename from/to.
        "diff --git a/mod.py b/bench.py\nsimilarity index 100%\nrename from mod.py\nrename to y.py\n",
        "diff --git a/mod.py b/y.py\nsimilarity index 100%\nrename from mod.py\nrename to bench.py\n",
        "diff --git a/mod.py b/y.py\ncopy from mod.py\ncopy to tests/t.py\n",
        "diff --git a/x b/x\nrename old mod.py\nrename new bench.py\n",
        // Headers after garbage, after a hunk, in a git header git gives up on.
        "diff --git a/mod.py b/mod.py\nindex 1..2 100644\nhello\n--- a/bench.py\n+++ b/bench.py\n@@ -1 +1 @@\n-a\n+b\n",
        "diff --git a/bench.py b/bench.py\n@@ -1 +1 @@\n-a\n+b\n",
        "--- a/mod.py\n+++ b/mod.py\n@@ -1 +1 @@\n-a\n+b\n--- a/tests/t.py\n+++ b/tests/t.py\n@@ -1 +1 @@\n-a\n+b\n",
        // RFC 934 nesting.
        "- --- a/bench.py\t2024-01-01 00:00:00 +0000\n- +++ b/bench.py\n@@ -1 +1 @@\n-a\n+b\n",
        // Names with a timestamp after spaces, no tab.
        "--- a/bench.py 2024-01-01 10:00:00.000000000 +0000\n+++ b/bench.py 2024-01-01 10:00:00.000000000 +0000\n@@ -1 +1 @@\n-a\n+b\n",
    ];
    for c in cases {
        match chk(c) {
            PatchCheck::Rejected(why) => assert!(
                why.contains("bench.py") || why.contains("tests/"),
                "{why}\n{c}"
            ),
            other => panic!("{other:?}\n{c}"),
        }
    }
}

#[test]
fn hunk_bodies_are_skipped_only_when_exact() {
    // A removed "-- a/bench.py" line is content, not a header.
    let content = "--- a/m.sql\n+++ b/m.sql\n@@ -1,2 +1,2 @@\n--- a/bench.py\n+++ b/bench.py\n x\n";
    ok(content, &["m.sql"]);
    // Counts one short: the lines after the body are headers to GNU patch.
    let short = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+b\n--- a/bench.py\n+++ b/bench.py\n@@ -1 +1 @@\n-a\n+b\n";
    rejected(short, &["bench.py"]);
    // Counts too large: the body swallows the next header in the structured reading, but
    // the patch is then read line by line.
    let long = "--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n-a\n+b\n--- a/bench.py\n+++ b/bench.py\n@@ -1 +1 @@\n-a\n+b\n";
    rejected(long, &["bench.py"]);
    // A comment line GNU patch skips inside a body.
    let hash = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,1 @@\n#c\n--- x\n-z\n+w\ngarbage\n@@ -1,2 +1,2 @@\n--- a/bench.py\n+++ b/bench.py\n@@ -1 +1 @@\n-a\n+b\n";
    rejected(hash, &["bench.py"]);
    // An orphan @@ (no header before it): GNU patch skips it and reads what follows.
    let orphan = "@@ -1,2 +1,2 @@\n--- a/bench.py\n+++ b/bench.py\n@@ -1 +1 @@\n-a\n+b\n";
    rejected(orphan, &["bench.py"]);
    // After a context diff GNU patch ignores unified hunks and reads their lines.
    let ctx_first = "*** a/m.py\n--- b/m.py\n***************\n*** 1 ****\n! x\n--- 1 ----\n! y\n--- a/foo\n+++ b/foo\n@@ -1,2 +1,2 @@\n--- a/bench.py\n+++ b/bench.py\n";
    rejected(ctx_first, &["bench.py"]);
}

#[test]
fn escapes_and_dot_git() {
    rejected(&DIFF.replace("mod.py", "../etc/passwd"), &["escapes", ".."]);
    rejected(&DIFF.replace("mod.py", "x/../../y"), &["escapes"]);
    rejected(&DIFF.replace("mod.py", ".git/config"), &[".git"]);
    rejected(
        &DIFF.replace("mod.py", "sub/.git/hooks/pre-commit"),
        &[".git"],
    );
    rejected(&DIFF.replace("mod.py", ".GIT/config"), &[".GIT"]);
    rejected(
        "--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n",
        &["absolute"],
    );
    rejected(
        "diff --git a/x b/x\nrename from /etc/passwd\nrename to x\n",
        &["absolute"],
    );
    rejected(
        "diff --git a/x b/x\nrename from x\nrename to ../x\n",
        &["escapes"],
    );
    // /dev/null with a timestamp is not a path.
    ok(
        "--- /dev/null\t1970-01-01 00:00:00.000000000 +0000\n+++ b/n.py\t2024-01-01 00:00:00.000000000 +0000\n@@ -0,0 +1 @@\n+x\n",
        &["n.py"],
    );
    ok(
        "--- /dev/null 1970-01-01 00:00:00 +0000\n+++ b/n.py\n@@ -0,0 +1 @@\n+x\n",
        &["n.py"],
    );
    // A protected rename target is caught on either side.
    rejected(
        "diff --git a/m.py b/tests/m.py\nrename from m.py\nrename to tests/m.py\n",
        &["tests/m.py"],
    );
}

#[test]
fn binary_submodule_modes_and_ed() {
    let bin = "diff --git a/x.bin b/x.bin\nindex 1..2 100644\nGIT binary patch\nliteral 3\nKcmZ?b0000\n\nliteral 0\nKcmV+b0000\n\n";
    rejected(bin, &["binary", "x.bin"]);
    rejected(
        "diff --git a/x.bin b/x.bin\nindex 1..2 100644\nBinary files a/x.bin and b/x.bin differ\n",
        &["binary"],
    );
    let sub = "diff --git a/vendor/lib b/vendor/lib\nnew file mode 160000\nindex 0000000..abc1234\n--- /dev/null\n+++ b/vendor/lib\n@@ -0,0 +1 @@\n+Subproject commit abc1234\n";
    rejected(sub, &["submodule", "160000"]);
    let f = parse(sub);
    assert!(f[0].submodule);
    rejected(
        "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 104755\n",
        &["setuid", "104755"],
    );
    rejected(
        "diff --git a/run.sh b/run.sh\nnew file mode 102755\n--- /dev/null\n+++ b/run.sh\n@@ -0,0 +1 @@\n+x\n",
        &["setgid"],
    );
    rejected(
        "diff --git a/run.sh b/run.sh\nindex 1..2 104755\n--- a/run.sh\n+++ b/run.sh\n@@ -1 +1 @@\n-a\n+b\n",
        &["104755"],
    );
    ok(
        "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n",
        &["run.sh"],
    );
    rejected(
        "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 1047550000000000\n",
        &["mode 37777777777"],
    );
    rejected(
        "diff --git a/d b/d\nnew file mode 040755\n",
        &["only files"],
    );
    let ed = "--- a/m.py\t2018-13-37 13:37:37.000000000 +0100\n+++ b/m.py\t2018-13-37 13:38:38.000000000 +0100\n1337a\n1,112d\n!id>~/pwned.txt\n.\n";
    rejected(ed, &["ed", "1337a"]);
}

#[test]
fn symlinks() {
    let link = |name: &str, target: &str| {
        format!(
            "diff --git a/{name} b/{name}\nnew file mode 120000\nindex 0000000..1234567\n--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n"
        )
    };
    let good = link("docs/latest", "v2/index.md");
    let f = parse(&good);
    assert_eq!(f[0].symlink_target.as_deref(), Some("v2/index.md"));
    assert_eq!(f[0].new_mode, Some(0o120000));
    ok(&good, &["docs/latest"]);
    rejected(&link("l", "/etc"), &["absolute", "\"l\""]);
    rejected(&link("sub/l", "../../etc"), &["outside"]);
    rejected(&link("l", ".git/hooks"), &[".git"]);
    rejected(&link("l", "tests"), &["protected"]);
    rejected(&link("l", "bench.py"), &["protected"]);
    rejected(&link("sub/l", "../bench.py"), &["protected"]);
    // Writing through a link the patch made, or to the link itself afterwards.
    let through = format!(
        "{}diff --git a/l/t.py b/l/t.py\n--- a/l/t.py\n+++ b/l/t.py\n@@ -1 +1 @@\n-a\n+b\n",
        link("l", "src")
    );
    rejected(&through, &["l/t.py", "goes through", "\"l\""]);
    let after = format!(
        "{}diff --git a/l b/l\n--- a/l\n+++ b/l\n@@ -1 +1 @@\n-src\n+x\n",
        link("l", "src")
    );
    rejected(&after, &["made it a symlink"]);
    // A file replaced by a symlink: deletion first, then the link: accepted.
    let retype = format!(
        "diff --git a/l b/l\ndeleted file mode 100644\n--- a/l\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n{}",
        link("l", "src")
    );
    ok(&retype, &["l"]);
    // GNU patch applies a deletion of a missing symlink reversed: the old target counts.
    let del = "diff --git a/l b/l\ndeleted file mode 120000\n--- a/l\n+++ /dev/null\n@@ -1 +0,0 @@\n-/etc\n\\ No newline at end of file\n";
    rejected(del, &["absolute"]);
    // A symlink whose target is not in the patch.
    rejected(
        "diff --git a/l b/l\nold mode 100644\nnew mode 120000\n",
        &["no hunk"],
    );
    rejected(
        "diff --git a/l b/m\nsimilarity index 100%\nrename from l\nrename to m\nindex 1..1 120000\n",
        &["renamed"],
    );
    // Base symlinks: writes below them and new targets for them.
    let base: BTreeSet<String> = ["etc_link".to_string()].into();
    let below = "--- a/etc_link/passwd\n+++ b/etc_link/passwd\n@@ -1 +1 @@\n-a\n+b\n";
    assert!(
        matches!(check_with(below, prot, &base), PatchCheck::Rejected(r) if r.contains("etc_link"))
    );
    let retarget = "diff --git a/etc_link b/etc_link\n--- a/etc_link\n+++ b/etc_link\n@@ -1 +1 @@\n-src\n+/etc\n\\ No newline at end of file\n";
    assert!(
        matches!(check_with(retarget, prot, &base), PatchCheck::Rejected(r) if r.contains("absolute"))
    );
    assert!(matches!(
        check_with(below, prot, &none()),
        PatchCheck::Ok(_)
    ));
    // A symlink in a patch whose bodies cannot be delimited.
    let messy = format!(
        "{}--- a/m.py\n+++ b/m.py\n@@ -1,5 +1,5 @@\n-a\n+b\nzzz\n",
        link("l", "src")
    );
    rejected(&messy, &["symlink", "delimited"]);
}

#[test]
fn a_patchs_size_counts_its_files_and_the_lines_its_hunks_add_and_remove() {
    let patch = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,3 @@\n x = 1\n-y = 2\n+y = 3\n+z = 4\n--- a/b.py\n+++ b/b.py\n@@ -1 +0,0 @@\n--- removed\n";
    let size = super::change_size(patch);
    assert_eq!(
        size,
        super::ChangeSize {
            files: 2,
            added: 2,
            removed: 2
        },
        "a removed line reading `-- removed` is a line, not a header"
    );
    assert_eq!(super::change_size(""), super::ChangeSize::default());
}
