//! Whether the user's policy lets an agent make a call at all, before any
//! tool body runs: a read-only agent calls only the tools that change
//! nothing, an agent has at most `calls_per_agent` calls in flight and
//! `sessions_per_agent` sessions of its own making. What a call would
//! type is judged later, line by line (see [`crate::tools::typing::consent`]).

use std::time::Instant;

use rmcp::model::{CallToolRequestParams, CallToolResult};

use crate::policy::InFlight;
use crate::policy::audit::Record;
use crate::tools::{Refusal, Terminal, ToolName};
use dtmcp_core::policy::Role;

impl Terminal {
    /// Admits a call of `tool` by `agent`: the count of its calls in
    /// flight (drop it when the call ends), or the result that refuses it.
    /// No policy admits everything and counts nothing.
    pub(crate) async fn admit(
        &self,
        tool: ToolName,
        agent: Option<&str>,
        request: &CallToolRequestParams,
    ) -> Result<Option<InFlight>, Box<CallToolResult>> {
        let governor = &self.inner.governor;
        if !governor.governs() {
            return Ok(None);
        }
        let agent = agent.unwrap_or("agent");
        let session = request.arguments.as_ref().and_then(|a| a.get("session")).and_then(|v| v.as_str());
        let refuse = |refusal: Refusal| {
            let record = Record {
                agent: agent.into(),
                session: session.map(str::to_string),
                tool: tool.as_str().into(),
                policy: "deny".into(),
                decision: "denied".into(),
                why: Some(refusal.to_string()),
                ..Record::default()
            };
            governor.audit(record);
            Box::new(self.finish_call(tool, session, Instant::now(), Err(refusal.into()), Default::default(), None))
        };
        if governor.role(agent) == Role::ReadOnly && !tool.read_only() {
            return Err(refuse(Refusal::ReadOnly { agent: agent.into(), tool: tool.as_str().into() }));
        }
        let counted = governor
            .enter_call(agent)
            .map_err(|value| refuse(Refusal::Limit { agent: agent.into(), limit: "calls_per_agent".into(), value }))?;
        if tool == ToolName::SessionCreate
            && let Some(value) = governor.policy().limits().sessions_per_agent
        {
            let live = self.sessions().live_names().await.unwrap_or_default();
            let own = live.iter().filter(|name| self.journal().creator_of(name).as_deref() == Some(agent)).count();
            if own >= value {
                return Err(refuse(Refusal::Limit { agent: agent.into(), limit: "sessions_per_agent".into(), value }));
            }
        }
        Ok(Some(counted))
    }
}
