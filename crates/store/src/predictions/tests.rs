use super::file::*;
use std::io::BufReader;
use std::path::Path;

use super::*;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn opts() -> LoadOptions {
    LoadOptions {
        model: "m".into(),
        max_patch_bytes: 1 << 20,
        rollout_per_file: false,
    }
}

fn texts(p: &Predictions, id: &str) -> Vec<(usize, String)> {
    p.by_instance[id]
        .iter()
        .map(|(i, p)| (*i, p.patch_text().to_string()))
        .collect()
}

fn err_text(r: anyhow::Result<Predictions>) -> String {
    match r {
        Ok(p) => panic!("expected an error, got {:?}", p.by_instance),
        Err(e) => format!("{e:#}"),
    }
}

fn any_warning(p: &Predictions, parts: &[&str]) -> bool {
    p.warnings
        .iter()
        .any(|w| parts.iter().all(|part| w.contains(part)))
}

// Kept from the first loader, on the new API.

#[test]
fn jsonl_rows_are_samples_in_order_and_bad_lines_are_named() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.jsonl",
        concat!(
            "{\"instance_id\":\"a\",\"model_name_or_path\":\"m\",\"model_patch\":\"one\"}\n",
            "this is not json\n",
            "\n",
            "{\"instance_id\":\"a\",\"model_name_or_path\":\"m\",\"model_patch\":null}\n",
            "{\"model_name_or_path\":\"m\",\"model_patch\":\"x\"}\n",
            "{\"instance_id\":\"b\",\"model_name_or_path\":\"m\",\"model_patch\":\"three\"}\n",
        ),
    );
    let preds = load(&[p], &opts()).unwrap();
    assert_eq!(texts(&preds, "a"), [(0, "one".into()), (1, "".into())]);
    assert_eq!(preds.by_instance["a"][&1].body, PatchBody::Empty);
    assert_eq!(
        preds.by_instance["a"][&1].origin.rsplit('/').next(),
        Some("p.jsonl:4")
    );
    assert_eq!(preds.by_instance["b"].len(), 1);
    assert_eq!(preds.warnings.len(), 2, "{:?}", preds.warnings);
    assert!(preds.warnings[0].contains("p.jsonl:2: not a JSON object"));
    assert!(preds.warnings[1].contains("p.jsonl:5: missing field `instance_id`"));
}

#[test]
fn json_list_and_keyed_object() {
    let d = tempfile::tempdir().unwrap();
    let l = write(
        d.path(),
        "l.json",
        "[{\"instance_id\":\"a\",\"model_patch\":\"x\"},\n 7]",
    );
    let preds = load(&[l], &opts()).unwrap();
    assert_eq!(preds.total(), 1);
    assert!(any_warning(&preds, &["l.json:[1]: 7 is not a JSON object"]));
    let o = write(
        d.path(),
        "o.json",
        concat!(
            "{\"a\": {\"model_patch\": \"x\"}, \"b\": {\"instance_id\": \"c\"},",
            " \"k\": [{\"model_patch\": \"k0\"}, {\"model_patch\": \"k1\"}]}"
        ),
    );
    let preds = load(&[o], &opts()).unwrap();
    assert_eq!(texts(&preds, "a"), [(0, "x".into())]);
    assert_eq!(texts(&preds, "k"), [(0, "k0".into()), (1, "k1".into())]);
    assert!(preds.by_instance["k"][&1].origin.ends_with("o.json:{k}[1]"));
    assert!(any_warning(&preds, &["o.json:{b}", "differs from its key"]));
}

// 1. Bounded memory.

#[test]
fn a_long_line_is_discarded_in_chunks_never_held_whole() {
    let long = "x".repeat(1 << 20);
    let text = format!("{long}\nnext\r\nlast");
    let mut r = BufReader::with_capacity(4096, text.as_bytes());
    let mut buf = Vec::new();
    match read_line_bounded(&mut r, &mut buf, 1024).unwrap() {
        LineRead::TooLong(n) => assert_eq!(n, 1 << 20),
        _ => panic!("not reported as too long"),
    }
    // The buffer's capacity never shrinks, so this is the most it ever held.
    assert!(buf.capacity() < 16 << 10, "{}", buf.capacity());
    assert!(matches!(
        read_line_bounded(&mut r, &mut buf, 1024).unwrap(),
        LineRead::Line
    ));
    assert_eq!(buf, b"next\r\n");
    assert!(matches!(
        read_line_bounded(&mut r, &mut buf, 1024).unwrap(),
        LineRead::Line
    ));
    assert_eq!(buf, b"last");
    assert!(matches!(
        read_line_bounded(&mut r, &mut buf, 1024).unwrap(),
        LineRead::Eof
    ));
}

#[test]
fn a_line_over_the_limit_is_skipped_with_a_warning_and_the_rest_is_read() {
    let d = tempfile::tempdir().unwrap();
    let big = "y".repeat(5000);
    let p = write(
        d.path(),
        "p.jsonl",
        &format!(
            "{{\"instance_id\":\"a\",\"model_patch\":\"s0\"}}\n\
             {{\"instance_id\":\"b\",\"model_patch\":\"{big}\"}}\n\
             {{\"instance_id\":\"a\",\"model_patch\":\"s1\"}}\n"
        ),
    );
    let preds = load_bounded(&[p], &opts(), 1024).unwrap();
    assert_eq!(texts(&preds, "a"), [(0, "s0".into()), (1, "s1".into())]);
    assert!(!preds.by_instance.contains_key("b"));
    assert!(
        any_warning(&preds, &["p.jsonl:2: line is 5036 bytes", "skipped"]),
        "{:?}",
        preds.warnings
    );
}

#[test]
fn a_patch_over_max_patch_bytes_is_kept_as_size_and_hash() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.jsonl",
        concat!(
            "{\"instance_id\":\"a\",\"model_patch\":\"0123456789\"}\n",
            "{\"instance_id\":\"b\",\"model_patch\":\"012345678\\n\\u00e9\"}\n",
        ),
    );
    let o = LoadOptions {
        model: "m".into(),
        max_patch_bytes: 10,
        rollout_per_file: false,
    };
    let preds = load(&[p], &o).unwrap();
    assert_eq!(
        preds.by_instance["a"][&0].body,
        PatchBody::Text("0123456789".into())
    );
    let b = &preds.by_instance["b"][&0];
    let full = "012345678\n\u{e9}";
    assert_eq!(
        b.body,
        PatchBody::TooLarge {
            bytes: 12,
            sha256: sha256_hex(full.as_bytes())
        }
    );
    assert_eq!(b.patch_text(), "");
    assert_eq!(b.patch_sha256(), sha256_hex(full.as_bytes()));
    assert_eq!(
        preds.by_instance["a"][&0].patch_sha256(),
        sha256_hex(b"0123456789")
    );
}

#[test]
fn a_json_document_also_turns_oversize_patches_into_too_large() {
    let d = tempfile::tempdir().unwrap();
    let l = write(
        d.path(),
        "l.json",
        "[{\"instance_id\":\"a\",\"model_patch\":\"0123456789ABC\"}]",
    );
    let k = write(
        d.path(),
        "k.json",
        "{\"a\": [{\"model_patch\":\"short\"}, {\"model_patch\":\"0123456789ABC\"}]}",
    );
    let o = LoadOptions {
        model: "m".into(),
        max_patch_bytes: 10,
        rollout_per_file: false,
    };
    let sha = sha256_hex(b"0123456789ABC");
    let too_large = PatchBody::TooLarge {
        bytes: 13,
        sha256: sha,
    };
    let preds = load(&[l], &o).unwrap();
    assert_eq!(preds.by_instance["a"][&0].body, too_large);
    let preds = load(&[k], &o).unwrap();
    assert_eq!(
        preds.by_instance["a"][&0].body,
        PatchBody::Text("short".into())
    );
    assert_eq!(preds.by_instance["a"][&1].body, too_large);
}

// 2. Non-UTF-8.

#[test]
fn a_non_utf8_line_is_that_lines_warning_not_the_files() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("p.jsonl");
    let mut bytes = b"{\"instance_id\":\"a\",\"model_patch\":\"s0\"}\n".to_vec();
    bytes.extend_from_slice(b"{\"instance_id\":\"a\",\"model_patch\":\"\xff\xfe\"}\n");
    bytes.extend_from_slice(b"{\"instance_id\":\"b\",\"model_patch\":\"ok\"}\n");
    std::fs::write(&p, bytes).unwrap();
    let preds = load(&[p], &opts()).unwrap();
    assert_eq!(texts(&preds, "a"), [(0, "s0".into())]);
    assert_eq!(texts(&preds, "b"), [(0, "ok".into())]);
    assert_eq!(preds.warnings.len(), 1, "{:?}", preds.warnings);
    assert!(preds.warnings[0].contains("p.jsonl:2: not UTF-8 (invalid byte at column 35)"));
}

// 3. Other models' rows.

#[test]
fn other_models_rows_are_skipped_with_one_warning_per_file_and_name() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.jsonl",
        concat!(
            "{\"instance_id\":\"a\",\"model_name_or_path\":\"demo\",\"model_patch\":\"d0\"}\n",
            "{\"instance_id\":\"a\",\"model_name_or_path\":\"gpt-x\",\"model_patch\":\"g\"}\n",
            "{\"instance_id\":\"a\",\"model_patch\":\"d1\"}\n",
            "{\"instance_id\":\"a\",\"model_name_or_path\":\"\",\"model_patch\":\"d2\"}\n",
            "{\"instance_id\":\"b\",\"model_name_or_path\":\"gpt-x\",\"model_patch\":\"g\"}\n",
            "{\"instance_id\":\"b\",\"model_name_or_path\":\"my model\",\"model_patch\":\"g\"}\n",
            "{\"instance_id\":\"c\",\"model_name_or_path\":\"gpt-x\",\"model_patch\":\"g\"}\n",
        ),
    );
    let o = LoadOptions {
        model: "demo".into(),
        max_patch_bytes: 1 << 20,
        rollout_per_file: false,
    };
    let preds = load(&[p], &o).unwrap();
    assert_eq!(
        texts(&preds, "a"),
        [(0, "d0".into()), (1, "d1".into()), (2, "d2".into())]
    );
    assert_eq!(preds.by_instance["a"][&0].model_name_or_path, "demo");
    assert_eq!(preds.by_instance["a"][&1].model_name_or_path, "");
    assert!(!preds.by_instance.contains_key("b"));
    let foreign: Vec<&String> = preds
        .warnings
        .iter()
        .filter(|w| w.contains("are for model_name_or_path"))
        .collect();
    assert_eq!(foreign.len(), 2, "{:?}", preds.warnings);
    assert!(foreign[0].ends_with(
        "p.jsonl: 3 row(s) (lines 2, 5, 7) are for model_name_or_path \"gpt-x\", not \
         --model \"demo\"; not used (run with --model gpt-x to evaluate them)"
    ));
    assert!(foreign[1].contains("line 6) are for model_name_or_path \"my model\""));
    assert!(foreign[1].contains("--model 'my model'"));
}

// 4. Field names and types.

#[test]
fn unknown_fields_are_warned_once_per_file_and_field_with_a_hint() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.jsonl",
        concat!(
            "{\"instance_id\":\"a\",\"model_patch\":\"x\",\"model\":\"m\",\"cost\":1}\n",
            "{\"instance_id\":\"b\",\"model_patch\":\"x\",\"model\":\"m\"}\n",
            "{\"instance_id\":\"c\",\"model_patch\":\"x\",\"Instance_ID\":\"c\"}\n",
        ),
    );
    let preds = load(&[p], &opts()).unwrap();
    assert_eq!(preds.total(), 3);
    assert_eq!(preds.warnings.len(), 3, "{:?}", preds.warnings);
    assert!(any_warning(
        &preds,
        &[
            "unknown field \"model\" in 2 row(s) (lines 1, 2); ignored",
            "(did you mean \"model_name_or_path\"?)"
        ]
    ));
    assert!(any_warning(
        &preds,
        &["unknown field \"cost\" in 1 row(s) (line 1); ignored"]
    ));
    assert!(any_warning(
        &preds,
        &["\"Instance_ID\"", "line 3", "did you mean \"instance_id\"?"]
    ));
}

#[test]
fn a_row_without_model_patch_is_skipped_never_an_empty_patch() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.jsonl",
        concat!(
            "{\"instance_id\":\"a\",\"patch\":\"diff\"}\n",
            "{\"instance_id\":\"b\",\"model_patch\":null}\n",
            "{\"instance_id\":\"c\",\"diff\":\"d\"}\n",
            "{\"instance_id\":\"e\",\"patch\":\"diff\"}\n",
        ),
    );
    let preds = load(&[p], &opts()).unwrap();
    assert_eq!(preds.by_instance.keys().collect::<Vec<_>>(), ["b"]);
    assert_eq!(preds.by_instance["b"][&0].body, PatchBody::Empty);
    assert!(
        any_warning(
            &preds,
            &[
                "2 row(s) (lines 1, 4) have no \"model_patch\" field",
                "\"patch\" (did you mean \"model_patch\"?)",
                "not taken as empty patches"
            ]
        ),
        "{:?}",
        preds.warnings
    );
    assert!(any_warning(
        &preds,
        &["(line 3) have no \"model_patch\"", "\"diff\" (did you mean"]
    ));
}

#[test]
fn wrongly_typed_fields_and_non_objects_name_the_line_and_field() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.jsonl",
        concat!(
            "{\"instance_id\":\"a\",\"model_patch\":5}\n",
            "{\"instance_id\":\"b\",\"model_patch\":\"x\",\"sample\":-1}\n",
            "{\"instance_id\":\"c\",\"model_patch\":\"x\",\"sample\":\"x\"}\n",
            "[1, 2]\n",
            "{\"instance_id\":7,\"model_patch\":\"x\"}\n",
            "{\"instance_id\":\" \",\"model_patch\":\"x\"}\n",
            "{\"instance_id\":\"d\",\"model_patch\":\"x\",\"model_name_or_path\":[1]}\n",
            "{\"instance_id\":\"f\",\"model_patch\":\"x\",\"model_patch\":\"y\"}\n",
            "{\"instance_id\":\"ok\",\"model_patch\":\"x\"}\n",
        ),
    );
    let preds = load(&[p], &opts()).unwrap();
    assert_eq!(preds.by_instance.keys().collect::<Vec<_>>(), ["ok"]);
    let expect = [
        "p.jsonl:1: field `model_patch` is 5, expected a string or null; row skipped",
        "p.jsonl:2: field `sample` is -1, expected a sample index",
        "p.jsonl:3: field `sample` is the string \"x\", expected a sample index",
        "p.jsonl:4: a list is not a JSON object; skipped",
        "p.jsonl:5: field `instance_id` is 7, expected a string; skipped",
        "p.jsonl:6: empty `instance_id`; skipped",
        "p.jsonl:7: field `model_name_or_path` is a list, expected a string",
        "p.jsonl:8: field `model_patch` given more than once; row skipped",
    ];
    for e in expect {
        assert!(any_warning(&preds, &[e]), "{e}\n{:?}", preds.warnings);
    }
}

// 5. Several files.

#[test]
fn several_files_give_sample_order() {
    let d = tempfile::tempdir().unwrap();
    let f0 = write(
        d.path(),
        "0.jsonl",
        "{\"instance_id\":\"a\",\"model_patch\":\"s0\"}\n",
    );
    let f1 = write(
        d.path(),
        "1.jsonl",
        "{\"instance_id\":\"a\",\"model_patch\":\"s1\"}\n",
    );
    let preds = load(&[f1.clone(), f0.clone()], &opts()).unwrap();
    assert_eq!(texts(&preds, "a"), [(0, "s1".into()), (1, "s0".into())]);
    let preds = load(&[f0, f1], &opts()).unwrap();
    assert_eq!(texts(&preds, "a"), [(0, "s0".into()), (1, "s1".into())]);
}

#[test]
fn several_files_an_instance_missing_from_a_file_is_a_gap() {
    let d = tempfile::tempdir().unwrap();
    let f0 = write(
        d.path(),
        "0.jsonl",
        "{\"instance_id\":\"a\",\"model_patch\":\"a0\"}\n",
    );
    let f1 = write(
        d.path(),
        "1.jsonl",
        "{\"instance_id\":\"b\",\"model_patch\":\"b1\"}\n",
    );
    let f2 = write(
        d.path(),
        "2.jsonl",
        "{\"instance_id\":\"a\",\"model_patch\":\"a2\"}\n",
    );
    let preds = load(&[f0, f1, f2], &opts()).unwrap();
    assert_eq!(texts(&preds, "a"), [(0, "a0".into()), (2, "a2".into())]);
    assert_eq!(texts(&preds, "b"), [(1, "b1".into())]);
}

#[test]
fn several_files_two_rows_of_an_instance_in_one_file_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let f0 = write(
        d.path(),
        "0.jsonl",
        "{\"instance_id\":\"a\",\"model_patch\":\"a0\"}\n",
    );
    let f1 = write(
        d.path(),
        "1.jsonl",
        concat!(
            "{\"instance_id\":\"a\",\"model_patch\":\"a1\"}\n",
            "{\"instance_id\":\"b\",\"model_patch\":\"b1\"}\n",
            "{\"instance_id\":\"a\",\"model_patch\":\"again\"}\n",
        ),
    );
    let e = err_text(load(&[f0, f1], &opts()));
    assert!(e.contains("1.jsonl:1 and "), "{e}");
    assert!(
        e.contains("1.jsonl:3: instance \"a\" has 2 rows in one file"),
        "{e}"
    );
}

#[test]
fn several_files_a_row_declaring_another_sample_warns_and_file_order_wins() {
    let d = tempfile::tempdir().unwrap();
    let f0 = write(
        d.path(),
        "0.jsonl",
        "{\"instance_id\":\"a\",\"sample\":0,\"model_patch\":\"a0\"}\n",
    );
    let f1 = write(
        d.path(),
        "1.jsonl",
        concat!(
            "{\"instance_id\":\"a\",\"sample\":0,\"model_patch\":\"a1\"}\n",
            "{\"instance_id\":\"b\",\"sample\":1,\"model_patch\":\"b1\"}\n",
            "{\"instance_id\":\"c\",\"sample\":3,\"model_patch\":\"c1\"}\n",
        ),
    );
    let preds = load(&[f0, f1], &opts()).unwrap();
    assert_eq!(texts(&preds, "a"), [(0, "a0".into()), (1, "a1".into())]);
    assert_eq!(texts(&preds, "c"), [(1, "c1".into())]);
    assert_eq!(preds.warnings.len(), 1, "{:?}", preds.warnings);
    assert!(
        preds.warnings[0].contains("1.jsonl: 2 row(s) (lines 1, 3) give a \"sample\" other than 1")
    );
}

// 6. One file.

#[test]
fn one_file_declared_samples_give_the_index_gaps_allowed() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.jsonl",
        concat!(
            "{\"instance_id\":\"a\",\"sample\":3,\"model_patch\":\"s3\"}\n",
            "{\"instance_id\":\"a\",\"sample\":0,\"model_patch\":\"s0\"}\n",
            "{\"instance_id\":\"b\",\"model_patch\":\"b0\"}\n",
            "{\"instance_id\":\"b\",\"model_patch\":\"b1\"}\n",
        ),
    );
    let preds = load(&[p], &opts()).unwrap();
    assert_eq!(texts(&preds, "a"), [(0, "s0".into()), (3, "s3".into())]);
    assert_eq!(preds.by_instance["a"][&3].sample, 3);
    assert_eq!(texts(&preds, "b"), [(0, "b0".into()), (1, "b1".into())]);
    assert!(preds.warnings.is_empty(), "{:?}", preds.warnings);
}

#[test]
fn one_file_the_same_sample_twice_is_an_error_naming_both_lines() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.jsonl",
        concat!(
            "{\"instance_id\":\"x\",\"sample\":0,\"model_patch\":\"s0\"}\n",
            "{\"instance_id\":\"x\",\"sample\":2,\"model_patch\":\"s2\"}\n",
            "{\"instance_id\":\"x\",\"sample\":1,\"model_patch\":\"s1\"}\n",
            "{\"instance_id\":\"y\",\"sample\":0,\"model_patch\":\"y\"}\n",
            "\n",
            "\n",
            "{\"instance_id\":\"x\",\"sample\":1,\"model_patch\":\"dup\"}\n",
        ),
    );
    let e = err_text(load(std::slice::from_ref(&p), &opts()));
    let f = p.display().to_string();
    assert!(
        e.contains(&format!(
            "{f}:3 and {f}:7: instance \"x\" sample 1 given twice"
        )),
        "{e}"
    );
}

#[test]
fn one_file_mixed_sample_declarations_are_an_error_naming_the_lines() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.jsonl",
        concat!(
            "{\"instance_id\":\"a\",\"sample\":1,\"model_patch\":\"s1\"}\n",
            "{\"instance_id\":\"a\",\"model_patch\":\"what\"}\n",
            "{\"instance_id\":\"b\",\"model_patch\":\"b0\"}\n",
            "{\"instance_id\":\"a\",\"sample\":0,\"model_patch\":\"s0\"}\n",
        ),
    );
    let e = err_text(load(&[p], &opts()));
    assert!(
        e.contains("p.jsonl: instance \"a\" gives \"sample\" on lines 1, 4 but not on line 2"),
        "{e}"
    );
}

#[test]
fn one_file_a_defective_row_keeps_its_place_so_later_rows_do_not_move_up() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.jsonl",
        concat!(
            "{\"instance_id\":\"a\",\"model_patch\":\"s0\"}\n",
            "{\"instance_id\":\"a\",\"model_patch\":5}\n",
            "{\"instance_id\":\"a\",\"model_patch\":\"s2\"}\n",
            "{\"instance_id\":\"a\",\"model_name_or_path\":\"other\",\"model_patch\":\"o\"}\n",
            "{\"instance_id\":\"a\",\"model_patch\":\"s3\"}\n",
        ),
    );
    let preds = load(&[p], &opts()).unwrap();
    assert_eq!(
        texts(&preds, "a"),
        [(0, "s0".into()), (2, "s2".into()), (3, "s3".into())]
    );
}

// 7. All problems at once.

#[test]
fn every_problem_of_every_file_comes_in_one_error() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.jsonl",
        concat!(
            "{\"instance_id\":\"a\",\"model_patch\":\"1\"}\n",
            "{\"instance_id\":\"a\",\"model_patch\":\"2\"}\n",
            "{\"instance_id\":\"b\",\"model_patch\":\"1\"}\n",
            "{\"instance_id\":\"b\",\"model_patch\":\"2\"}\n",
        ),
    );
    let bad = write(d.path(), "bad.json", "[{\"instance_id\": \"a\",\n oops]");
    let missing = d.path().join("missing.jsonl");
    let e = err_text(load(&[p, bad, missing], &opts()));
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 5, "{e}");
    assert!(lines[0].contains("(4 problem(s))"), "{e}");
    assert!(e.contains("bad.json:2:"), "{e}");
    assert!(e.contains("missing.jsonl: cannot read"), "{e}");
    assert!(e.contains("p.jsonl:2: instance \"a\" has 2 rows"), "{e}");
    assert!(e.contains("p.jsonl:4: instance \"b\" has 2 rows"), "{e}");
}

#[test]
fn a_json_list_in_a_jsonl_file_and_a_bom_are_read() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.jsonl",
        "\u{feff}\n  [{\"instance_id\":\"a\",\"model_patch\":\"x\"}]",
    );
    let preds = load(&[p], &opts()).unwrap();
    assert_eq!(texts(&preds, "a"), [(0, "x".into())]);
    let q = write(
        d.path(),
        "q.jsonl",
        "\u{feff}{\"instance_id\":\"a\",\"model_patch\":\"x\"}\r\n",
    );
    let preds = load(&[q], &opts()).unwrap();
    assert_eq!(texts(&preds, "a"), [(0, "x".into())]);
    assert!(preds.warnings.is_empty(), "{:?}", preds.warnings);
}

#[test]
fn a_jsonl_file_named_json_and_repeated_keys_are_errors() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.json",
        "{\"instance_id\":\"a\",\"model_patch\":\"x\"}\n{\"instance_id\":\"b\",\"model_patch\":\"y\"}\n",
    );
    let e = err_text(load(&[p], &opts()));
    assert!(e.contains("name the file .jsonl"), "{e}");
    let k = write(
        d.path(),
        "k.json",
        "{\"a\": {\"model_patch\":\"x\"}, \"a\": {\"model_patch\":\"y\"}}",
    );
    let e = err_text(load(&[k], &opts()));
    assert!(
        e.contains("k.json: key(s) \"a\" given more than once"),
        "{e}"
    );
    let s = write(d.path(), "s.json", "5");
    let e = err_text(load(&[s], &opts()));
    assert!(e.contains("expected a list of predictions or an object keyed by instance_id"));
}

#[test]
fn the_example_predictions_load_cleanly() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/_predictions/demo-agent.jsonl");
    let o = LoadOptions {
        model: "demo-agent".into(),
        max_patch_bytes: harness_core::patch::MAX_PATCH_BYTES,
        rollout_per_file: false,
    };
    let preds = load(&[p], &o).unwrap();
    assert!(preds.warnings.is_empty(), "{:?}", preds.warnings);
    assert!(preds.total() > 0);
}

#[test]
fn rollout_files_under_their_own_names_are_k_samples_of_one_model() {
    let dir = tempfile::tempdir().unwrap();
    let row = |model: &str, id: &str, patch: &str| {
        serde_json::json!({"instance_id": id, "model_name_or_path": model, "model_patch": patch})
            .to_string()
    };
    let a = write(
        dir.path(),
        "run_1.jsonl",
        &[row("m-run_1", "x", "A"), row("m-run_1", "y", "B")].join("\n"),
    );
    let b = write(
        dir.path(),
        "run_2.jsonl",
        // A second model mixed into one rollout file: not used, and said so.
        &[row("m-run_2", "x", "C"), row("other", "y", "D")].join("\n"),
    );
    let files = [a, b];

    // Without the flag, GSO's rollout names are other models: nothing is used.
    let plain = load(&files, &opts()).unwrap();
    assert_eq!(plain.total(), 0);
    assert!(plain.warnings.iter().any(|w| w.contains("\"m-run_1\"")));

    let per_file = LoadOptions {
        rollout_per_file: true,
        ..opts()
    };
    let p = load(&files, &per_file).unwrap();
    assert_eq!(texts(&p, "x"), vec![(0, "A".into()), (1, "C".into())]);
    assert_eq!(texts(&p, "y"), vec![(0, "B".into())]);
    assert_eq!(p.by_instance["x"][&0].model_name_or_path, "m-run_1");
    assert_eq!(p.by_instance["x"][&1].model_name_or_path, "m-run_2");
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("\"other\"") && w.contains("one file, one rollout")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn what_an_agent_spent_travels_with_its_row_and_a_malformed_one_is_named() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "p.jsonl",
        concat!(
            "{\"instance_id\":\"a\",\"model_name_or_path\":\"m\",\"model_patch\":\"x\",",
            "\"agent_usage\":{\"requests\":3,\"api_errors\":1,\"input_tokens\":10,\"output_tokens\":4,",
            "\"cache_read_tokens\":0,\"cache_write_tokens\":0,\"cost_usd\":0.5,\"models\":[\"g\"],",
            "\"unpriced_models\":[],\"last_api_error\":null,\"ended_on_api_error\":false,",
            "\"refused_over_budget\":0,\"retries\":1},\"agent_seconds\":12.5}\n",
            "{\"instance_id\":\"b\",\"model_name_or_path\":\"m\",\"model_patch\":\"y\",",
            "\"agent_usage\":{\"requests\":\"three\"},\"agent_seconds\":1}\n",
            "{\"instance_id\":\"c\",\"model_name_or_path\":\"m\",\"model_patch\":\"z\"}\n",
        ),
    );
    let preds = load(&[p], &opts()).unwrap();
    assert_eq!(
        preds.total(),
        3,
        "a bad agent_usage does not cost the patch"
    );
    let a = preds.by_instance["a"][&0].agent.as_ref().unwrap();
    assert_eq!((a.usage.requests, a.usage.retries), (3, 1));
    assert_eq!((a.usage.dollars(), a.seconds), (Some(0.5), Some(12.5)));
    assert!(preds.by_instance["b"][&0].agent.is_none());
    assert!(preds.by_instance["c"][&0].agent.is_none());
    assert!(
        any_warning(&preds, &["p.jsonl:2", "`agent_usage`", "not shown"]),
        "{:?}",
        preds.warnings
    );
}
