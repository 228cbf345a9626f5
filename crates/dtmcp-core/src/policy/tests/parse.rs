use std::time::Duration;

use rstest::rstest;

use crate::policy::parse::{line_column, parse_duration};
use crate::policy::{Action, Policy, PolicyError, Role};

fn error(text: &str) -> PolicyError {
    match Policy::parse(text) {
        Ok(_) => panic!("parsed: {text}"),
        Err(e) => e,
    }
}

#[test]
fn the_issues_example_parses() {
    let text = r#"
default = "allow"                # allow | ask | deny

[[rule]]
action = "deny"
command = '(^|[;&|]\s*)rm\s+-[a-z]*r[a-z]*f'
agents = ["*"]
sessions = ["*"]
to = "shell"
why = "recursive deletes need a person"

[[rule]]
action = "ask"
program = "python*"
why = "a person watches the REPL"

[agents."reviewer*"]
role = "read-only"

[limits]
sessions_per_agent = 20
calls_per_agent = 8
ask_timeout = "2m"
"#;
    let policy = Policy::parse(text).expect("parses");
    assert_eq!((policy.default_action(), policy.rules()), (Action::Allow, 2));
    let limits = policy.limits();
    assert_eq!(limits.sessions_per_agent, Some(20));
    assert_eq!(limits.calls_per_agent, Some(8));
    assert_eq!(limits.ask_timeout, Duration::from_secs(120));
    let second = policy.rule(1).expect("two rules");
    assert_eq!((second.line, second.action, second.pattern.as_str()), (12, Action::Ask, "python*"));
}

#[test]
fn an_empty_file_allows_all() {
    let policy = Policy::parse("# nothing yet\n").expect("parses");
    assert_eq!((policy.default_action(), policy.rules()), (Action::Allow, 0));
    assert_eq!(policy.limits(), Policy::allow_all().limits());
}

#[test]
fn read_only_wins_whatever_the_order() {
    let text = r#"
[agents."*"]
role = "operator"
[agents."reviewer*"]
role = "read-only"
[agents."reviewer-bob"]
role = "operator"
[agents."claude-code#?"]
"#;
    let policy = Policy::parse(text).expect("parses");
    assert_eq!(policy.role("reviewer-bob"), Role::ReadOnly);
    assert_eq!(policy.role("reviewer"), Role::ReadOnly);
    assert_eq!(policy.role("alice"), Role::Operator);
    assert_eq!(policy.role("claude-code#2"), Role::Operator);
    assert_eq!(Policy::allow_all().role("anyone"), Role::Operator);
}

#[rstest]
#[case::syntax("default = \n", 1, 11, "string values must be quoted")]
#[case::unknown_top_key("defualt = \"deny\"\n", 1, 1, "unknown field `defualt`")]
#[case::unknown_rule_key("[[rule]]\naction = \"deny\"\ncomand = 'rm'\n", 3, 1, "unknown field `comand`")]
#[case::unknown_agent_key("[agents.a]\nrole = \"read-only\"\nrol = 1\n", 3, 1, "unknown field `rol`")]
#[case::unknown_limit_key("[limits]\ncalls = 3\n", 2, 1, "unknown field `calls`")]
#[case::bad_action("[[rule]]\naction = \"block\"\ncommand = 'x'\n", 2, 10, "unknown variant `block`")]
#[case::bad_role("[agents.a]\nrole = \"admin\"\n", 2, 8, "unknown variant `admin`")]
#[case::missing_action("\n[[rule]]\ncommand = 'x'\n", 2, 1, "missing field `action`")]
#[case::bad_regex("[[rule]]\naction = \"deny\"\n  command = 'rm (-rf'\n", 3, 13, "bad regex `rm (-rf`")]
#[case::no_command_or_program("x = 1\n", 1, 1, "unknown field `x`")]
#[case::rule_without_pattern(
    "default = \"ask\"\n[[rule]]\naction = \"deny\"\nwhy = \"?\"\n",
    2,
    1,
    "needs a `command`"
)]
#[case::program_to_shell("[[rule]]\naction = \"ask\"\nprogram = \"py*\"\nto = \"shell\"\n", 4, 6, "`to` must be")]
#[case::program_to_any("[[rule]]\naction = \"ask\"\nprogram = \"py*\"\nto = \"any\"\n", 4, 6, "`to` must be")]
#[case::bad_to("[[rule]]\naction = \"ask\"\ncommand = 'x'\nto = \"repl\"\n", 4, 6, "unknown variant `repl`")]
#[case::bad_glob("[[rule]]\naction = \"ask\"\ncommand = 'x'\nagents = [\"ok\", \"[ab\"]\n", 4, 17, "bad glob `[ab`")]
#[case::bad_program_glob("[[rule]]\naction = \"ask\"\nprogram = \"[py\"\n", 3, 11, "bad glob `[py`")]
#[case::bad_role_glob("[agents.\"[x\"]\nrole = \"read-only\"\n", 1, 9, "bad glob `[x`")]
#[case::empty_agents("[[rule]]\naction = \"ask\"\ncommand = 'x'\nagents = []\n", 4, 10, "`agents` is empty")]
#[case::bad_duration("[limits]\nask_timeout = \"2 minutes\"\n", 2, 15, "bad duration \"2 minutes\"")]
#[case::bad_duration_type("[limits]\nask_timeout = 1.5\n", 2, 15, "a duration such as")]
#[case::negative_duration("[limits]\nask_timeout = -3\n", 2, 15, "a negative duration")]
#[case::zero_duration("[limits]\nask_timeout = \"0s\"\n", 2, 15, "more than zero")]
#[case::zero_limit("[limits]\ncalls_per_agent = 0\n", 2, 19, "at least 1")]
#[case::negative_limit("[limits]\nsessions_per_agent = -1\n", 2, 22, "expected usize")]
#[case::columns_count_characters("[[rule]] # é\naction = \"deny\"\nwhy = \"é\"; x = 1\n", 3, 10, "")]
fn errors(#[case] text: &str, #[case] line: usize, #[case] column: usize, #[case] message: &str) {
    let e = error(text);
    assert_eq!((e.line, e.column), (line, column), "{e}");
    assert!(e.message.contains(message), "{e}");
    assert!(e.to_string().starts_with(&format!("line {line}, column {column}: ")), "{e}");
}

#[rstest]
#[case::seconds("120s", 120_000)]
#[case::minutes("2m", 120_000)]
#[case::hours("1h", 3_600_000)]
#[case::millis("500ms", 500)]
#[case::spaced(" 3 s ", 3_000)]
fn durations(#[case] text: &str, #[case] millis: u64) {
    assert_eq!(parse_duration(text), Ok(Duration::from_millis(millis)));
}

#[rstest]
#[case::no_unit("120")]
#[case::no_number("s")]
#[case::unknown_unit("2d")]
#[case::fraction("1.5s")]
#[case::negative("-1s")]
#[case::overflow("99999999999999999999h")]
#[case::too_long("9999999999999999h")]
fn bad_durations(#[case] text: &str) {
    assert!(parse_duration(text).is_err(), "{text}");
}

#[test]
fn bare_seconds_are_a_duration() {
    let policy = Policy::parse("[limits]\nask_timeout = 45\n").expect("parses");
    assert_eq!(policy.limits().ask_timeout, Duration::from_secs(45));
}

#[test]
fn line_and_column_of_offsets() {
    let text = "ab\ncé\nx";
    assert_eq!(line_column(text, 0), (1, 1));
    assert_eq!(line_column(text, 2), (1, 3));
    assert_eq!(line_column(text, 3), (2, 1));
    assert_eq!(line_column(text, 5), (2, 2), "inside é: its start");
    assert_eq!(line_column(text, 7), (3, 1));
    assert_eq!(line_column(text, 99), (3, 2));
}
