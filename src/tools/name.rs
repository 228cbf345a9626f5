//! The tools by name: one enum, so what sets a tool apart (does it act in
//! a session, does it type, does it change anything) is said once, here,
//! rather than in lists of strings scattered over the server.

use rmcp::model::ToolAnnotations;

/// Every tool the server offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolName {
    /// `session_create`: open a session.
    SessionCreate,
    /// `session_list`: the sessions.
    SessionList,
    /// `session_close`: close a session.
    SessionClose,
    /// `session_logs`: keep or delete a session's logs.
    SessionLogs,
    /// `session_split`: a second pane beside a session's.
    SessionSplit,
    /// `session_resize`: a session's terminal size.
    SessionResize,
    /// `shell_integrate`: the integration into a shell that lacks it.
    ShellIntegrate,
    /// `run`: type a command line and wait for it.
    Run,
    /// `wait`: keep waiting for a running command.
    Wait,
    /// `send`: type text and press keys.
    Send,
    /// `expect`: answer a program's questions by rules.
    Expect,
    /// `read`: lines of a session's log, its screen or its raw bytes.
    Read,
    /// `search`: a regex over a session's log.
    Search,
    /// `regions`: a session's commands.
    Regions,
    /// `guide`: the long guidance, by topic.
    Guide,
}

impl ToolName {
    /// Every tool, in the order the server lists them.
    pub const ALL: [ToolName; 15] = [
        ToolName::SessionCreate,
        ToolName::SessionList,
        ToolName::SessionClose,
        ToolName::SessionLogs,
        ToolName::SessionSplit,
        ToolName::SessionResize,
        ToolName::ShellIntegrate,
        ToolName::Run,
        ToolName::Wait,
        ToolName::Send,
        ToolName::Expect,
        ToolName::Read,
        ToolName::Search,
        ToolName::Regions,
        ToolName::Guide,
    ];

    /// The name clients call it by.
    pub const fn as_str(self) -> &'static str {
        match self {
            ToolName::SessionCreate => "session_create",
            ToolName::SessionList => "session_list",
            ToolName::SessionClose => "session_close",
            ToolName::SessionLogs => "session_logs",
            ToolName::SessionSplit => "session_split",
            ToolName::SessionResize => "session_resize",
            ToolName::ShellIntegrate => "shell_integrate",
            ToolName::Run => "run",
            ToolName::Wait => "wait",
            ToolName::Send => "send",
            ToolName::Expect => "expect",
            ToolName::Read => "read",
            ToolName::Search => "search",
            ToolName::Regions => "regions",
            ToolName::Guide => "guide",
        }
    }

    /// The tool called `name`, if there is one.
    pub fn parse(name: &str) -> Option<ToolName> {
        ToolName::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Whether it types into a session's pane: its texts may carry the
    /// placeholders of secrets, and who called it is recorded as typing.
    pub fn types(self) -> bool {
        matches!(self, ToolName::Run | ToolName::Send | ToolName::Expect)
    }

    /// Whether it works in a live session the agent follows, so that its
    /// reply is led by what finished there since the agent's last call.
    pub fn follows_a_session(self) -> bool {
        self.types() || matches!(self, ToolName::Wait | ToolName::Read | ToolName::Search | ToolName::Regions)
    }

    /// Whether it reads a session's record without waiting on it: its
    /// reply counts as the agent having looked (the once-per-agent state
    /// notes the time), which the waiting tools note themselves.
    pub fn reads_the_record(self) -> bool {
        matches!(self, ToolName::Read | ToolName::Search | ToolName::Regions)
    }

    /// Whether it changes nothing: no session, file or pane (waiting and
    /// reading change nothing; a region's file written for a read is a
    /// copy of what the log holds).
    pub fn read_only(self) -> bool {
        self.reads_the_record() || matches!(self, ToolName::SessionList | ToolName::Guide | ToolName::Wait)
    }

    /// Whether it may destroy something: a session's pane and shell, its
    /// logs, or whatever a command typed into a shell does.
    pub fn destructive(self) -> bool {
        self.types() || matches!(self, ToolName::SessionClose | ToolName::SessionLogs)
    }

    /// Whether calling it again with the same arguments changes nothing
    /// more: a size set, logs marked, a shell integrated, a session closed.
    pub fn idempotent(self) -> bool {
        matches!(
            self,
            ToolName::SessionResize | ToolName::SessionLogs | ToolName::ShellIntegrate | ToolName::SessionClose
        )
    }

    /// Whether it reaches past this server: what it types runs in a shell
    /// that may do anything anywhere (over ssh, too).
    pub fn open_world(self) -> bool {
        self.types()
    }

    /// Its name for people, in a client's list of tools.
    pub const fn title(self) -> &'static str {
        match self {
            ToolName::SessionCreate => "Open a terminal session",
            ToolName::SessionList => "List terminal sessions",
            ToolName::SessionClose => "Close a terminal session",
            ToolName::SessionLogs => "Keep or delete a session's logs",
            ToolName::SessionSplit => "Split a session's pane",
            ToolName::SessionResize => "Resize a session's terminal",
            ToolName::ShellIntegrate => "Integrate the shell at a prompt",
            ToolName::Run => "Run a command line",
            ToolName::Wait => "Wait for a running command",
            ToolName::Send => "Type text and press keys",
            ToolName::Expect => "Answer a program's prompts",
            ToolName::Read => "Read a session's log or screen",
            ToolName::Search => "Search a session's log",
            ToolName::Regions => "List a session's commands",
            ToolName::Guide => "Read the guide",
        }
    }

    /// The shape of its structured result: the facts of the call (never
    /// its output), the same keys for every tool where they apply, and
    /// each tool's own beside them. Every key but `tool` and `ok` may be
    /// absent; each has one type, for clients that read one.
    pub fn output_schema(self) -> rmcp::model::JsonObject {
        use serde_json::json;
        let span = || {
            json!({"type": "object", "properties": {
                "first": {"type": "integer", "description": "The first line."},
                "last": {"type": "integer", "description": "The last line."}
            }})
        };
        let listener = || {
            json!({"type": "object", "properties": {
                "kind": {"type": "string", "enum": ["tcp", "udp", "unix"], "description": "The socket's kind."},
                "address": {"type": "string", "description": "The address it is bound to (tcp, udp)."},
                "port": {"type": "integer", "description": "Its port (tcp, udp)."},
                "path": {"type": "string", "description": "Its path (unix)."},
                "connect": {"type": "string", "description": "Where a client on this host reaches it, e.g. 127.0.0.1:8123."},
                "pid": {"type": "integer", "description": "The process holding it."},
                "program": {"type": "string", "description": "That process's command name."},
                "command": {"type": "string", "description": "Its command line, shortened."}
            }})
        };
        let listeners = |what: &str| json!({"type": "array", "items": listener(), "description": what});
        let jobs = || {
            json!({"type": "array", "description": "The jobs its shell runs in the background (by pid: job numbers are the shell's own).", "items": {"type": "object", "properties": {
                "pid": {"type": "integer", "description": "The job's leader."},
                "pgid": {"type": "integer", "description": "Its process group."},
                "command": {"type": "string", "description": "Its command line, shortened."},
                "stopped": {"type": "boolean", "description": "Whether it is stopped."},
                "processes": {"type": "integer", "description": "How many processes it has."},
                "listening": {"type": "array", "items": {"type": "string"}, "description": "Where its processes listen."}
            }}})
        };
        let not_seen = || json!({"type": "array", "items": {"type": "string"}, "description": "Hosts or containers the session reaches (e.g. box via ssh) whose listening ports cannot be seen from here."});
        let mut props = json!({
            "tool": {"type": "string", "description": "The tool called."},
            "ok": {"type": "boolean", "description": "Whether the call did what it was asked (false: isError, see error)."},
            "session": {"type": "string", "description": "The session the call worked in."},
            "state": {"type": "string", "enum": ["done", "nothing_ran", "waiting_for_input", "matched", "running", "settled", "full_screen", "session_ended"],
                "description": "How the command stands: done (it ended), running (the wait ran out), waiting_for_input (a program waits at a prompt), matched (until matched), nothing_ran, settled, full_screen, session_ended."},
            "exit_code": {"type": "integer", "description": "The command's exit status; absent when its shell did not tell it."},
            "signal": {"type": "string", "description": "The signal an exit status of 128 + N names (SIGSEGV for 139, SIGINT for 130, SIGKILL for 137)."},
            "pipeline": {"type": "array", "items": {"type": "integer"}, "description": "The exit status of each stage of its pipeline."},
            "region": {"type": "integer", "description": "The command's region: read session=... region=N reads its output."},
            "lines": span(),
            "clipped": span(),
            "created": {"type": "string", "description": "The session the call made."},
            "redactions": {"type": "integer", "description": "How many secrets the reply shows as placeholders."},
            "error": {"type": "string", "enum": ["bad_input", "refused", "session", "logger", "tmux", "store", "failed"],
                "description": "What kind of failure, when ok is false."},
            "refusal": {"type": "object", "description": "Why the session did not take the call, as data: the kind (refusal), the session, and whom it names (by: {kind: you|agent|person|someone, name})."},
            "listening": listeners("What the session's processes listen on now."),
            "now_listening": listeners("What met the call's port or listening wait."),
            "stopped_listening": listeners("What stopped listening since the last reply to this agent in this session."),
            "jobs": jobs(),
            "ports_not_seen": not_seen()
        });
        if let Some(p) = props.as_object_mut() {
            if let Some(lines) = p.get_mut("lines").and_then(|v| v.as_object_mut()) {
                lines.insert("description".into(), "The lines of session.txt the command's output spans.".into());
            }
            if let Some(gap) = p.get_mut("clipped").and_then(|v| v.as_object_mut()) {
                gap.insert("description".into(), "The output lines left out of the reply's middle.".into());
            }
            if self == ToolName::SessionList {
                p.insert(
                    "sessions".into(),
                    json!({"type": "array", "description": "The open sessions.", "items": {"type": "object", "properties": {
                        "name": {"type": "string", "description": "The session."},
                        "program": {"type": "string", "description": "What holds its terminal."},
                        "cwd": {"type": "string", "description": "Its directory."},
                        "last_command": {"type": "string", "description": "The last command, finished or not."},
                        "last_exit": {"type": "integer", "description": "Its exit status, once it finished."},
                        "last_answered": {"type": "string", "description": "The line last typed into the program that command runs (a debugger's or a REPL's), when that is newer than the command."},
                        "attach": {"type": "string", "description": "The command a person runs to watch it."},
                        "listening": listeners("What its processes listen on."),
                        "jobs": jobs(),
                        "ports_not_seen": not_seen()
                    }}}),
                );
            }
        }
        let schema = json!({"type": "object", "properties": props, "required": ["tool", "ok"]});
        match schema {
            serde_json::Value::Object(map) => map,
            _ => rmcp::model::JsonObject::new(),
        }
    }

    /// What a client may learn of it before calling it, honestly: a
    /// read-only tool says only that; the others say whether they may
    /// destroy, whether a repeat changes anything, and whether they reach
    /// an open world.
    pub fn annotations(self) -> ToolAnnotations {
        let titled = ToolAnnotations::with_title(self.title());
        if self.read_only() {
            return titled.read_only(true);
        }
        titled
            .read_only(false)
            .destructive(self.destructive())
            .idempotent(self.idempotent())
            .open_world(self.open_world())
    }
}

impl std::fmt::Display for ToolName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::ToolName;

    #[test]
    fn every_name_reads_back_as_its_tool() {
        for t in ToolName::ALL {
            assert_eq!(ToolName::parse(t.as_str()), Some(t));
        }
        assert_eq!(ToolName::parse("rm"), None);
    }

    #[test]
    fn the_tools_that_type_follow_their_session_and_change_things() {
        for t in ToolName::ALL.into_iter().filter(|t| t.types()) {
            assert!(t.follows_a_session() && !t.read_only() && t.destructive() && t.open_world(), "{t}");
        }
        assert!(ToolName::Guide.read_only() && !ToolName::Guide.follows_a_session());
    }

    #[test]
    fn output_schemas_are_portable_objects_that_name_the_shared_facts() {
        for t in ToolName::ALL {
            let schema = serde_json::Value::Object(t.output_schema());
            assert_eq!(schema["type"], "object", "{t}");
            let problems = crate::tools::schema::problems(&schema);
            assert!(problems.is_empty(), "{t}: {problems:?}");
            for key in ["tool", "ok", "state", "exit_code", "region", "refusal"] {
                assert!(schema["properties"].get(key).is_some(), "{t}: {key}");
            }
        }
        let list = serde_json::Value::Object(ToolName::SessionList.output_schema());
        assert!(list["properties"]["sessions"]["items"]["properties"]["attach"].is_object());
    }

    #[test]
    fn annotations_are_honest_and_every_tool_has_a_title() {
        for t in ToolName::ALL {
            let a = t.annotations();
            assert!(a.title.as_deref().is_some_and(|s| s.len() > 5), "{t}");
            assert_eq!(a.read_only_hint, Some(t.read_only()), "{t}");
            if t.read_only() {
                assert!(a.destructive_hint.is_none() && a.idempotent_hint.is_none(), "{t}: hints of a read-only tool");
            }
        }
        assert_eq!(ToolName::SessionClose.annotations().destructive_hint, Some(true));
        assert_eq!(ToolName::SessionLogs.annotations().destructive_hint, Some(true));
        assert_eq!(ToolName::SessionCreate.annotations().destructive_hint, Some(false));
        assert_eq!(ToolName::Run.annotations().open_world_hint, Some(true));
        assert_eq!(ToolName::SessionResize.annotations().idempotent_hint, Some(true));
    }
}
