use rstest::rstest;

use crate::policy::{Action, Policy, To, Typed};

/// Rules for the table below (each line's number matters for `line`).
const POLICY: &str = r#"
default = "allow"

[[rule]]
action = "deny"
command = '(^|[;&|]\s*)rm\s+-[a-z]*r[a-z]*f'
why = "recursive deletes need a person"

[[rule]]
action = "ask"
command = '^git push'

[[rule]]
action = "deny"
command = '^rm '
sessions = ["prod*"]

[[rule]]
action = "allow"
command = '^sudo ls'
agents = ["alice"]

[[rule]]
action = "ask"
command = '^sudo'

[[rule]]
action = "deny"
program = "python*"
command = 'shutil\.rmtree'

[[rule]]
action = "ask"
program = "psql"

[[rule]]
action = "deny"
command = 'DROP TABLE'
to = "any"

[[rule]]
action = "deny"
command = '^curl'
agents = ["claude-code#?", "bot-*"]
"#;

fn judge(policy: &Policy, agent: &str, session: &str, line: &str, to: To) -> (Action, Option<usize>, Option<String>) {
    let verdict = policy.judge(&Typed { agent, session, line, to });
    (verdict.action, verdict.rule.map(|r| r.index), verdict.piece)
}

#[rstest]
#[case::nothing_matches("ls -la", To::Shell, Action::Allow, None, None)]
#[case::deny_whole_line("rm -rf /tmp/x", To::Shell, Action::Deny, Some(0), None)]
#[case::deny_after_and("make && rm -rf x", To::Shell, Action::Deny, Some(0), None)]
#[case::deny_in_substitution("echo $(rm -rf x)", To::Shell, Action::Deny, Some(0), Some("rm -rf x"))]
#[case::deny_in_backticks("echo `rm -rf x`", To::Shell, Action::Deny, Some(0), Some("rm -rf x"))]
#[case::deny_in_subshell("(rm -rf y) > log", To::Shell, Action::Deny, Some(0), Some("rm -rf y"))]
#[case::deny_after_if("if rm -rf x; then :; fi", To::Shell, Action::Deny, Some(0), Some("rm -rf x"))]
#[case::single_quotes_hide_a_piece("echo 'a; rm -rf x'", To::Shell, Action::Deny, Some(0), None)]
#[case::ask_anchored_in_a_piece("ls; git push origin", To::Shell, Action::Ask, Some(1), Some("git push origin"))]
#[case::ask_in_a_pipe("echo y | git push", To::Shell, Action::Ask, Some(1), Some("git push"))]
#[case::quoted_push_is_no_piece("echo 'git push'", To::Shell, Action::Allow, None, None)]
#[case::deny_beats_ask_whatever_the_order("git push && rm -rf x", To::Shell, Action::Deny, Some(0), None)]
#[case::session_glob_misses("rm x", To::Shell, Action::Allow, None, None)]
#[case::agent_glob_misses_for_others("sudo ls /root", To::Shell, Action::Ask, Some(4), None)]
#[case::agent_glob_with_question_mark("curl x", To::Shell, Action::Deny, Some(8), None)]
#[case::shell_rules_skip_programs("rm -rf x", To::Program("bash-ish"), Action::Allow, None, None)]
#[case::program_glob_matches("shutil.rmtree('/')", To::Program("python3"), Action::Deny, Some(5), None)]
#[case::program_glob_misses("shutil.rmtree('/')", To::Program("node"), Action::Allow, None, None)]
#[case::program_lines_are_not_split(
    "x = 1; shutil.rmtree('/')",
    To::Program("python3.12"),
    Action::Deny,
    Some(5),
    None
)]
#[case::program_rule_skips_shell("shutil.rmtree('/')", To::Shell, Action::Allow, None, None)]
#[case::bare_program_rule("select 1;", To::Program("psql"), Action::Ask, Some(6), None)]
#[case::deny_beats_bare_ask("DROP TABLE x;", To::Program("psql"), Action::Deny, Some(7), None)]
#[case::any_reaches_shell("psql -c 'DROP TABLE x'", To::Shell, Action::Deny, Some(7), None)]
fn table(
    #[case] line: &str,
    #[case] to: To,
    #[case] action: Action,
    #[case] rule: Option<usize>,
    #[case] piece: Option<&str>,
) {
    let policy = Policy::parse(POLICY).expect("parses");
    let got = judge(&policy, "claude-code#2", "build", line, to);
    assert_eq!(got, (action, rule, piece.map(str::to_string)), "{line:?}");
}

#[test]
fn agent_and_session_globs() {
    let policy = Policy::parse(POLICY).expect("parses");
    assert_eq!(judge(&policy, "alice", "build", "sudo ls /root", To::Shell).0, Action::Ask, "ask still matches alice");
    assert_eq!(judge(&policy, "alice", "web-1", "curl x", To::Shell).0, Action::Allow);
    assert_eq!(judge(&policy, "bot-7", "web-1", "curl x", To::Shell).1, Some(8));
    assert_eq!(judge(&policy, "claude-code#12", "web-1", "curl x", To::Shell).0, Action::Allow, "? is one char");
    let verdict = policy.judge(&Typed { agent: "a", session: "prod-db", line: "cd /; rm x", to: To::Shell });
    assert_eq!((verdict.action, verdict.piece.as_deref()), (Action::Deny, Some("rm x")));
    let rule = verdict.rule.expect("a rule decided");
    assert_eq!((rule.index, rule.line, rule.pattern.as_str()), (2, 13, "^rm "));
    let first = policy.rule(0).expect("rule 0");
    assert_eq!((first.line, first.why.as_deref()), (4, Some("recursive deletes need a person")));
}

#[rstest]
#[case::allow_default("allow", "ls", Action::Allow)]
#[case::ask_default("ask", "ls", Action::Ask)]
#[case::deny_default("deny", "ls", Action::Deny)]
#[case::blank_line_takes_default("deny", "   ", Action::Deny)]
#[case::comment_only_takes_default("ask", "# nothing", Action::Ask)]
#[case::rule_beats_default_ask("ask", "echo hi", Action::Allow)]
fn defaults(#[case] default: &str, #[case] line: &str, #[case] action: Action) {
    let text = format!("default = \"{default}\"\n[[rule]]\naction = \"allow\"\ncommand = '^echo'\n");
    let policy = Policy::parse(&text).expect("parses");
    assert_eq!(policy.default_action().to_string(), default);
    assert_eq!(judge(&policy, "a", "s", line, To::Shell).0, action, "{line:?}");
}

const ALLOW_LIST: &str = r#"
default = "deny"
[[rule]]
action = "allow"
command = '^git (status|diff|log)\b'
[[rule]]
action = "allow"
command = '^(ls|pwd|cat)\b'
[[rule]]
action = "ask"
command = '^cargo '
"#;

#[rstest]
#[case::one_allowed("git status", Action::Allow, Some(0), None)]
#[case::all_allowed("git diff | cat && ls -la", Action::Allow, Some(0), None)]
#[case::one_not_allowed("git status && rm x", Action::Deny, None, Some("rm x"))]
#[case::hidden_in_substitution("ls $(rm x)", Action::Deny, None, Some("rm x"))]
#[case::ask_with_allowed("ls; cargo build", Action::Ask, Some(2), Some("cargo build"))]
#[case::unlisted("make", Action::Deny, None, None)]
#[case::allowed_whole_does_not_cover_pieces("cat x; make", Action::Deny, None, Some("make"))]
fn allow_list(#[case] line: &str, #[case] action: Action, #[case] rule: Option<usize>, #[case] piece: Option<&str>) {
    let policy = Policy::parse(ALLOW_LIST).expect("parses");
    assert_eq!(judge(&policy, "a", "s", line, To::Shell), (action, rule, piece.map(str::to_string)), "{line:?}");
}

#[test]
fn precedence_ignores_file_order() {
    for (first, second) in [("allow", "deny"), ("deny", "allow"), ("ask", "deny"), ("deny", "ask")] {
        let text =
            format!("[[rule]]\naction = \"{first}\"\ncommand = 'x'\n[[rule]]\naction = \"{second}\"\ncommand = 'x'\n");
        let policy = Policy::parse(&text).expect("parses");
        let verdict = policy.judge(&Typed { agent: "a", session: "s", line: "x", to: To::Shell });
        assert_eq!(verdict.action, Action::Deny);
        assert_eq!(verdict.rule.map(|r| r.action), Some(Action::Deny));
    }
    let text = "[[rule]]\naction = \"ask\"\ncommand = 'a'\n[[rule]]\naction = \"ask\"\ncommand = 'b'\n";
    let policy = Policy::parse(text).expect("parses");
    let verdict = policy.judge(&Typed { agent: "a", session: "s", line: "b; a", to: To::Shell });
    assert_eq!(verdict.rule.map(|r| r.index), Some(0), "the first rule in the file among equals");
    assert!(Action::Allow < Action::Ask && Action::Ask < Action::Deny);
}

#[test]
fn allow_all_allows() {
    let policy = Policy::allow_all();
    assert_eq!(policy.rules(), 0);
    let verdict = policy.judge(&Typed { agent: "a", session: "s", line: "rm -rf /", to: To::Shell });
    assert_eq!((verdict.action, verdict.rule, verdict.piece), (Action::Allow, None, None));
    assert_eq!(policy.limits().ask_timeout.as_secs(), 120);
}

fn two_hundred_rules() -> Policy {
    let mut text = String::from("default = \"allow\"\n");
    for n in 0..200 {
        let action = ["allow", "ask", "deny"][n % 3];
        text += &format!("[[rule]]\naction = \"{action}\"\ncommand = '^tool{n}\\b'\nagents = [\"agent-*\"]\n");
    }
    text += "[[rule]]\naction = \"deny\"\ncommand = '(^|[;&|]\\s*)rm\\s+-[a-z]*r[a-z]*f'\n";
    Policy::parse(&text).expect("parses")
}

#[test]
fn two_hundred_rules_judge() {
    let policy = two_hundred_rules();
    assert_eq!(policy.rules(), 201);
    let cases = [
        ("cargo test --release -p foo 2>&1 && echo ok", Action::Allow, None),
        ("tool3 x", Action::Allow, Some(3)),
        ("tool4 x && tool3", Action::Ask, Some(4)),
        ("tool3; tool4; tool199 y", Action::Ask, Some(4)),
        ("tool5 | tool9", Action::Deny, Some(5)),
        ("tool1; rm -rf x", Action::Deny, Some(200)),
        ("tool1000", Action::Allow, None),
    ];
    for (line, action, rule) in cases {
        let verdict = policy.judge(&Typed { agent: "agent-1", session: "s", line, to: To::Shell });
        assert_eq!((verdict.action, verdict.rule.map(|r| r.index)), (action, rule), "{line:?}");
    }
    let other = policy.judge(&Typed { agent: "alice", session: "s", line: "tool5", to: To::Shell });
    assert_eq!(other.action, Action::Allow);
}

/// How long a 200-rule policy takes on a typical line. Run with
/// `cargo test --release -p dtmcp-core policy::tests::judge::timing -- --ignored --nocapture`.
#[test]
#[ignore]
fn timing() {
    let policy = two_hundred_rules();
    let typed =
        Typed { agent: "agent-1", session: "s", line: "cargo test --release -p foo 2>&1 && echo ok", to: To::Shell };
    let runs = 100_000;
    let start = std::time::Instant::now();
    for _ in 0..runs {
        std::hint::black_box(policy.judge(std::hint::black_box(&typed)));
    }
    println!("{:?} per judge", start.elapsed() / runs);
}

#[test]
fn verdicts_read_as_messages() {
    let policy = Policy::parse(POLICY).expect("parses");
    let denied = policy.judge(&Typed { agent: "a", session: "s", line: "ls; echo $(rm -rf x)", to: To::Shell });
    assert_eq!(
        denied.to_string(),
        r"deny: rule 1 (line 4, `(^|[;&|]\s*)rm\s+-[a-z]*r[a-z]*f`): recursive deletes need a person, on `rm -rf x`"
    );
    let list = Policy::parse(ALLOW_LIST).expect("parses");
    let defaulted = list.judge(&Typed { agent: "a", session: "s", line: "ls && make", to: To::Shell });
    assert_eq!(defaulted.to_string(), "deny: the default, on `make`");
    assert_eq!(Action::Ask.to_string(), "ask");
}
