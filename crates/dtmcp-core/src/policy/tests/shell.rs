use rstest::rstest;

use crate::policy::simple_commands;

#[rstest]
#[case::one_command("ls -la", &["ls -la"])]
#[case::blank("   ", &[])]
#[case::trimmed("  ls  ", &["ls"])]
#[case::and_or("a && b || c", &["a", "b", "c"])]
#[case::semicolons_and_empties("a;; b ;", &["a", "b"])]
#[case::pipes("a | b |& c", &["a", "b", "c"])]
#[case::background("sleep 1 & rm x", &["sleep 1", "rm x"])]
#[case::newlines("a\nb\r\n", &["a", "b"])]
#[case::redirect_ampersands("make 2>&1 >/dev/null &> log >& x", &["make 2>&1 >/dev/null &> log >& x"])]
#[case::append_redirect_then_and("cargo test --release -p foo 2>&1 && echo ok", &["cargo test --release -p foo 2>&1", "echo ok"])]
#[case::clobber_is_no_pipe("echo a >| f", &["echo a >| f"])]
#[case::single_quotes_hide("echo 'a; rm -rf x'", &["echo 'a; rm -rf x'"])]
#[case::double_quotes_hide(r#"echo "a && rm -rf x""#, &[r#"echo "a && rm -rf x""#])]
#[case::escaped_operator(r"echo a\; rm x", &[r"echo a\; rm x"])]
#[case::escaped_quote(r#"echo \"; rm x"#, &[r#"echo \""#, "rm x"])]
#[case::ansi_c_quote(r"echo $'a\'; b'; c", &[r"echo $'a\'; b'", "c"])]
#[case::substitution("echo $(rm -rf x) done", &["rm -rf x", "echo $(rm -rf x) done"])]
#[case::substitution_in_double_quotes(r#"echo "now $(date; rm y)""#, &["date", "rm y", r#"echo "now $(date; rm y)""#])]
#[case::backticks("echo `rm x`; ls", &["rm x", "echo `rm x`", "ls"])]
#[case::backticks_in_double_quotes(r#"echo "`rm x`""#, &["rm x", r#"echo "`rm x`""#])]
#[case::nested_substitution("a $(b $(c))", &["c", "b $(c)", "a $(b $(c))"])]
#[case::process_substitution("diff <(ls a) >(tee b)", &["ls a", "tee b", "diff <(ls a) >(tee b)"])]
#[case::subshell("(cd x && rm -rf y) > log", &["cd x", "rm -rf y", "> log"])]
#[case::group("{ rm -rf x; ls; }", &["rm -rf x", "ls"])]
#[case::if_keywords("if rm -rf x; then echo y; else echo z; fi", &["rm -rf x", "echo y", "echo z"])]
#[case::while_loop("while true; do rm x; done", &["true", "rm x"])]
#[case::negation("! grep -q a f", &["grep -q a f"])]
#[case::time("time make", &["make"])]
#[case::keyword_prefix_is_a_word("timeout 5 ls; iffy", &["timeout 5 ls", "iffy"])]
#[case::comment("ls # ; rm -rf x", &["ls"])]
#[case::comment_then_newline("ls # c\nrm x", &["ls", "rm x"])]
#[case::hash_in_word("echo a#b; echo $#", &["echo a#b", "echo $#"])]
#[case::arithmetic("echo $((1 + (2 * 3))); ls", &["echo $((1 + (2 * 3)))", "ls"])]
#[case::arithmetic_command("(( i++ )); ls", &["(( i++ ))", "ls"])]
#[case::array("a=(x y; z) && ls", &["a=(x y; z)", "ls"])]
#[case::parameter_with_substitution("echo ${x:-$(rm y)}", &["rm y", "echo ${x:-$(rm y)}"])]
#[case::case_pattern("case $x in a) rm y;; esac", &["case $x in a", "rm y"])]
#[case::unclosed_single_quote("ls; echo 'a; rm x", &["ls", "echo 'a; rm x"])]
#[case::unclosed_double_quote(r#"ls; echo "a; rm x"#, &["ls", r#"echo "a; rm x"#])]
#[case::unclosed_substitution("ls; echo $(rm x; pwd", &["ls", "rm x", "pwd", "echo $(rm x; pwd"])]
#[case::unclosed_subshell("(rm x; ls", &["rm x", "ls"])]
#[case::stray_close_paren("ls ) rm x", &["ls", "rm x"])]
#[case::unicode("echo héllo; ls ü", &["echo héllo", "ls ü"])]
#[case::trailing_backslash("echo \\", &["echo \\"])]
fn splits(#[case] line: &str, #[case] expected: &[&str]) {
    assert_eq!(simple_commands(line), expected, "{line:?}");
}

#[test]
fn deep_nesting_does_not_overflow() {
    let line = "$(".repeat(10_000) + "rm x";
    let pieces = simple_commands(&line);
    assert!(!pieces.is_empty());
}

#[test]
fn pieces_are_slices_of_the_line() {
    let line = "a && `b` ; $(c) | d";
    let range = line.as_bytes().as_ptr_range();
    for piece in simple_commands(line) {
        assert!(range.contains(&piece.as_ptr()), "{piece:?}");
    }
}
