//! The guidance texts, kept as Markdown files under `texts/` and compiled
//! in: one source for the server instructions, every tool description, the
//! `guide` tool and the Claude Code skill, so they never disagree.

/// Claude Code cuts a server's instructions and each tool description at
/// this many characters without telling the model.
pub const CLIENT_BUDGET: usize = 2048;

/// The server instructions: when to use a session, and the mistakes that
/// matter most.
pub const INSTRUCTIONS: &str = include_str!("../../texts/instructions.md");

/// Tool descriptions, one file per tool.
pub mod tool {
    /// `session_create`.
    pub const SESSION_CREATE: &str = include_str!("../../texts/tools/session_create.md");
    /// `session_list`.
    pub const SESSION_LIST: &str = include_str!("../../texts/tools/session_list.md");
    /// `session_close`.
    pub const SESSION_CLOSE: &str = include_str!("../../texts/tools/session_close.md");
    /// `session_split`.
    pub const SESSION_SPLIT: &str = include_str!("../../texts/tools/session_split.md");
    /// `session_resize`.
    pub const SESSION_RESIZE: &str = include_str!("../../texts/tools/session_resize.md");
    /// `session_logs`.
    pub const SESSION_LOGS: &str = include_str!("../../texts/tools/session_logs.md");
    /// `run`.
    pub const RUN: &str = include_str!("../../texts/tools/run.md");
    /// `wait`.
    pub const WAIT: &str = include_str!("../../texts/tools/wait.md");
    /// `read`.
    pub const READ: &str = include_str!("../../texts/tools/read.md");
    /// `search`.
    pub const SEARCH: &str = include_str!("../../texts/tools/search.md");
    /// `regions`.
    pub const REGIONS: &str = include_str!("../../texts/tools/regions.md");
    /// `send`.
    pub const SEND: &str = include_str!("../../texts/tools/send.md");
    /// `expect`.
    pub const EXPECT: &str = include_str!("../../texts/tools/expect.md");
    /// `guide`.
    pub const GUIDE: &str = include_str!("../../texts/tools/guide.md");
    /// `shell_integrate`.
    pub const SHELL_INTEGRATE: &str = include_str!("../../texts/tools/shell_integrate.md");
}

/// One long-form topic of the `guide` tool and the skill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Topic {
    /// Its name, as the `guide` tool takes it.
    pub name: &'static str,
    /// What it covers, in a few words (the skill's index uses it).
    pub about: &'static str,
    /// Its Markdown text.
    pub text: &'static str,
}

/// Every topic; `patterns` first, as the skill's main file carries it.
pub const TOPICS: [Topic; 5] = [
    Topic {
        name: "patterns",
        about: "shell habits and their session form",
        text: include_str!("../../texts/guide/patterns.md"),
    },
    Topic {
        name: "programs",
        about: "REPLs, debuggers, ssh, prompts and how to answer them",
        text: include_str!("../../texts/guide/programs.md"),
    },
    Topic {
        name: "output",
        about: "how replies are clipped and summarised, and reading the rest",
        text: include_str!("../../texts/guide/output.md"),
    },
    Topic {
        name: "fullscreen",
        about: "vim, less, top: seeing the screen and quitting",
        text: include_str!("../../texts/guide/fullscreen.md"),
    },
    Topic {
        name: "sharing",
        about: "working in a pane a person watches or types in",
        text: include_str!("../../texts/guide/sharing.md"),
    },
];

/// The topic named `name`.
pub fn topic(name: &str) -> Option<&'static Topic> {
    TOPICS.iter().find(|t| t.name == name)
}

/// The names of every topic, for messages.
pub fn topic_names() -> String {
    TOPICS.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_fit_the_clients_budget() {
        assert!(INSTRUCTIONS.chars().count() < CLIENT_BUDGET, "{} characters", INSTRUCTIONS.chars().count());
    }

    #[test]
    fn every_topic_has_a_title_and_a_body() {
        for t in TOPICS {
            assert!(t.text.starts_with("# "), "{} starts with a title", t.name);
            assert!(t.text.len() > 500, "{} is long form", t.name);
            assert_eq!(topic(t.name), Some(&t));
        }
        assert_eq!(topic("nope"), None);
    }
}
