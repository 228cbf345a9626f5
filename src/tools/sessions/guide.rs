//! `guide`: the long form of the guidance, by topic. The texts live in
//! `texts/guide/` (see [`crate::docent::texts`]); the skill carries the same.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{schemars, tool, tool_router};
use serde::Deserialize;

use crate::docent::texts::{self, TOPICS};
use crate::tools::Terminal;
use crate::tools::ToolError;

/// Arguments of `guide`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GuideParams {
    /// The topic: "patterns" (shell habits and their session form), "programs" (REPLs, debuggers, ssh, prompts), "output" (clipping, summaries, reading the rest), "fullscreen" (vim, less, top), "sharing" (a person in the same pane). Omit it for the list of topics.
    #[serde(default)]
    pub topic: Option<String>,
}

#[tool_router(router = guide_router, vis = "pub(crate)")]
impl Terminal {
    /// Gives one topic of the guide.
    #[tool(
        name = "guide",
        description = texts::tool::GUIDE.trim_end(),
        meta = crate::tools::always_load()
    )]
    pub async fn guide(&self, Parameters(p): Parameters<GuideParams>) -> CallToolResult {
        self.call(crate::tools::ToolName::Guide, None, async move {
            guide_text(p.topic.as_deref()).map_err(ToolError::BadInput)
        })
        .await
    }
}

/// The reply for `topic`: its text, or the index when none is given.
fn guide_text(topic: Option<&str>) -> Result<String, String> {
    let Some(name) = topic.map(str::trim).filter(|t| !t.is_empty()) else {
        let mut out = String::from("guide topics (call guide topic=NAME):\n");
        for t in TOPICS {
            out.push_str(&format!("- {}: {}\n", t.name, t.about));
        }
        return Ok(out);
    };
    match texts::topic(&name.to_ascii_lowercase()) {
        Some(t) => Ok(t.text.to_string()),
        None => Err(format!("no guide topic {name:?}; the topics are {}", texts::topic_names())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_found_by_name_and_unknown_ones_listed() {
        assert!(guide_text(Some("programs")).expect("topic").contains("gdb"));
        assert!(guide_text(Some(" Output ")).expect("topic").starts_with("# Output"));
        let index = guide_text(None).expect("index");
        assert!(TOPICS.iter().all(|t| index.contains(t.name)), "{index}");
        let err = guide_text(Some("vim")).expect_err("unknown");
        assert!(err.contains("patterns, programs, output, fullscreen, sharing"), "{err}");
    }
}
