//! The redactor's tables of cases: shapes and values found, placeholders
//! kept and typed back, escapes, keys and screens.

use super::*;

const GH: &str = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";

fn run(text: &str, table: &mut Table) -> (String, Counts) {
    redact(text, &Known::default(), table)
}

#[test]
fn the_same_value_keeps_its_placeholder_and_kinds_number_apart() {
    let mut table = Table::default();
    let other = GH.replace("A1", "Z9");
    let (out, counts) = run(&format!("a {GH} b {other} c {GH}"), &mut table);
    assert_eq!(out, "a ‹secret:github-token:1› b ‹secret:github-token:2› c ‹secret:github-token:1›");
    assert_eq!(counts.to_string(), "3 github-token");
    let (again, _) = run(&format!("url=https://u:hunter2hunter2@h/ {other}"), &mut table);
    assert_eq!(again, "url=https://u:‹secret:url-password:1›@h/ ‹secret:github-token:2›");
    assert_eq!(table.value_of("‹secret:github-token:2›"), Some(other.as_str()));
}

#[test]
fn a_value_once_redacted_is_found_without_its_context() {
    let mut table = Table::default();
    run("DB_PASSWORD=correct-horse-battery", &mut table);
    let (out, counts) = run("echo correct-horse-battery", &mut table);
    assert_eq!(out, "echo ‹secret:password:1›");
    assert_eq!(counts.total(), 1);
}

#[test]
fn known_values_are_found_whatever_their_shape_but_not_short_ones() {
    let env = [("HOME", "/root"), ("MY_DEPLOY_TOKEN", "plainwords99"), ("API_KEY", "short"), ("X", "listedvalue")];
    let known = Known::from_env(env, &["X".to_string()]);
    assert_eq!(known.len(), 2);
    let (out, _) = redact("plainwords99 listedvalue short /root", &known, &mut Table::default());
    assert_eq!(out, "‹secret:my-deploy-token:1› ‹secret:x:1› short /root");
}

#[test]
fn a_numbered_private_key_keeps_its_lines_and_types_back_without_numbers() {
    let text = "  9  $ cat k\n 10  -----BEGIN PRIVATE KEY-----\n 11  MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n 12  -----END PRIVATE KEY-----\n 13  $";
    let mut table = Table::default();
    let (out, counts) = run(text, &mut table);
    assert_eq!(out, "  9  $ cat k\n 10  ‹secret:private-key:1›\n 11  ‹…›\n 12  ‹…›\n 13  $");
    assert_eq!(counts.total(), 1);
    let value = table.value_of("‹secret:private-key:1›");
    assert_eq!(value, Some("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"));
}

#[test]
fn placeholders_in_the_text_stay_and_a_seen_keys_lines_hide_alone() {
    let mut table = Table::default();
    let typed = "echo ‹secret:github-token:9› secret: ‹secret:x:1›";
    assert_eq!(run(typed, &mut table), (typed.to_string(), Counts::default()));
    run("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----", &mut table);
    let (out, _) = run(" 11  MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", &mut table);
    assert_eq!(out, " 11  ‹secret:private-key-line:1›");
}

#[test]
fn placeholders_type_back_and_unknown_ones_refuse() {
    let mut table = Table::default();
    run(GH, &mut table);
    assert_eq!(table.substitute("x ‹secret:github-token:1› y").as_deref(), Ok(format!("x {GH} y").as_str()));
    assert_eq!(table.substitute("no placeholder").as_deref(), Ok("no placeholder"));
    let err = table.substitute("‹secret:github-token:1› ‹secret:github-token:7›").unwrap_err();
    assert_eq!(err.placeholder, "‹secret:github-token:7›");
    assert!(err.to_string().contains("known: ‹secret:github-token:1›"), "{err}");
}

#[test]
fn the_table_survives_a_restart_in_a_private_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("secrets.json");
    let mut table = Table::default();
    run(GH, &mut table);
    table.save(&path).expect("save");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).expect("stat").permissions());
    assert_eq!(mode & 0o777, 0o600);
    let mut again = Table::load(&path);
    let other = GH.replace("A1", "Z9");
    let (out, _) = run(&format!("{other} {GH}"), &mut again);
    assert_eq!(out, "‹secret:github-token:2› ‹secret:github-token:1›");
}

#[test]
fn a_spelled_out_escape_inside_a_secret_does_not_hide_it() {
    let (head, tail) = GH.split_at(20);
    let mut table = Table::default();
    let raw = format!("out: {head}\\e[31m{tail}\\e[0m\\r\\n");
    let (out, counts) = run(&raw, &mut table);
    assert_eq!(out, "out: ‹secret:github-token:1›\\e[0m\\r\\n");
    assert_eq!(counts.total(), 1);
    assert_eq!(table.value_of("‹secret:github-token:1›"), Some(GH), "the value has no escape in it");
    let typed = format!("printf '{head}\\033[31m{tail}\\033[0m\\n'");
    assert_eq!(run(&typed, &mut table).0, "printf '‹secret:github-token:1›\\033[0m\\n'");
    // The raw view doubles a typed backslash.
    let echoed = format!("printf '{head}\\\\033[31m{tail}'");
    assert_eq!(run(&echoed, &mut table).0, "printf '‹secret:github-token:1›'");
    let path = r"C:\e\x1b wins";
    assert_eq!(run(path, &mut table).0, path);
    // A captured screen's real escapes, over two rows.
    let screen = format!("$ cat k\n\x1b[32m{head}\x1b[1m{tail}\x1b[0m\n$ ");
    assert_eq!(run(&screen, &mut table).0, "$ cat k\n\x1b[32m‹secret:github-token:1›\x1b[0m\n$ ");
}

/// A PEM key of `n` full lines, made up.
fn pem(n: usize) -> (String, Vec<String>) {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let lines: Vec<String> =
        (0..n).map(|k| (0..64).map(|i| alphabet[(i * 11 + k * 17 + 3) % 64] as char).collect()).collect();
    let text = format!("-----BEGIN PRIVATE KEY-----\n{}\nAb12==\n-----END PRIVATE KEY-----", lines.join("\n"));
    (text, lines)
}

#[test]
fn a_key_read_a_few_lines_at_a_time_stays_hidden() {
    let (key, lines) = pem(6);
    let numbered: Vec<String> = key.lines().enumerate().map(|(i, l)| format!("{:>4}  {l}", i + 10)).collect();
    let footer = "… more lines: read from_line=N";
    for (from, to) in [(0, 3), (3, 6), (6, 9), (2, 5), (4, 5)] {
        let mut table = Table::default();
        let part = format!("lines\n{}\n{footer}", numbered[from..to].join("\n"));
        let (out, counts) = run(&part, &mut table);
        for l in &lines {
            assert!(!out.contains(l.as_str()), "lines {from}..{to} show a key line:\n{out}");
        }
        assert!(counts.total() >= 1, "lines {from}..{to}:\n{out}");
        assert!(out.starts_with("lines\n") && out.ends_with(footer), "the rest stays:\n{out}");
    }
}

#[test]
fn a_split_pane_inherits_the_placeholders_and_the_switch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (parent, child, other) = (dir.path().join("p"), dir.path().join("c"), dir.path().join("o"));
    for d in [&parent, &child, &other] {
        std::fs::create_dir(d).expect("mkdir");
    }
    let mut table = Table::default();
    run(GH, &mut table);
    table.save(&parent.join(TABLE_FILE)).expect("save");
    inherit(&parent, &child).expect("inherit");
    assert_eq!(Table::load(&child.join(TABLE_FILE)).value_of("‹secret:github-token:1›"), Some(GH));
    assert!(!child.join(OFF_FILE).exists());
    std::fs::write(parent.join(OFF_FILE), "off\n").expect("off");
    inherit(&parent, &other).expect("inherit");
    assert!(other.join(OFF_FILE).exists());
}

#[test]
fn text_without_secrets_is_unchanged() {
    let text = "commit 9fceb02d0ae598e95dc970b74767f19372d61af8\nAuthor: me\n";
    assert_eq!(run(text, &mut Table::default()), (text.to_string(), Counts::default()));
}

/// `rows` of a screen `cols` wide, redacted.
fn screen<S: AsRef<str>>(rows: &[S], cols: usize, table: &mut Table) -> Vec<String> {
    redact_screen(rows, cols, &Known::default(), table).0
}

#[test]
fn a_secret_wrapped_over_screen_rows_is_hidden_in_each() {
    let (head, tail) = GH.split_at(20);
    let mut table = Table::default();
    // The line "$ echo GH" on a screen 26 wide: 6 + 20 characters fill
    // the first row, the rest of the token goes on in the second.
    let rows = [format!("$ echo {head}"), format!("{tail} done"), "$ ".into()];
    let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
    let shown = screen(&rows, 27, &mut table);
    assert_eq!(shown, ["$ echo ‹secret:github-token:1›", "‹…› done", "$ "]);
    // The same with colours, a wide character filling the row but its
    // last column, and a value the table already knows.
    let rows = [format!("\x1b[1m界{head}\x1b[0m"), tail.to_string()];
    let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
    let shown = screen(&rows, 23, &mut table);
    assert_eq!(shown, ["\x1b[1m界‹secret:github-token:1›", "‹…›"]);
    // A short row ends its line: the halves are no secret.
    let rows = [head, tail];
    assert_eq!(screen(&rows, 80, &mut Table::default()), rows);
}

#[test]
fn screen_rows_keep_their_number_and_their_other_text() {
    let mut table = Table::default();
    let rows = [format!("token {GH} ok"), "next".into(), String::new()];
    let shown = screen(&rows.iter().map(String::as_str).collect::<Vec<_>>(), 80, &mut table);
    assert_eq!(shown, ["token ‹secret:github-token:1› ok", "next", ""]);
    assert_eq!(screen(&["plain", "rows"], 5, &mut table), ["plain", "rows"]);
    assert_eq!(screen::<&str>(&[], 80, &mut table), Vec::<String>::new());
}

#[test]
fn a_value_learnt_in_one_line_is_hidden_in_every_line_of_the_reply() {
    let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    let text = format!(
        "AKIAIOSFODNN7EXAMPLE {secret}\n[default]\naws_secret_access_key = {secret}\nregion = x\naws configure: {secret}"
    );
    let mut table = Table::default();
    let (out, counts) = redact(&text, &Known::default(), &mut table);
    assert!(!out.contains(secret), "{out}");
    assert_eq!(counts.0.get("aws-secret-key"), Some(&3), "{out}");
}
