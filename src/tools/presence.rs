//! Whether someone else uses a session: a person attached to it, or a
//! command running that another party started. `session_close` refuses
//! such a session; a person closes it with `close --force`.

use super::Terminal;
use super::once::starter_of;

/// Who else uses a session, for a refusal.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Presence {
    /// tmux clients attached to the session (people: our own control client
    /// attaches elsewhere).
    pub attached: u32,
    /// The running command and who started it (`None`: a person).
    pub running: Option<(String, Option<String>)>,
}

impl Presence {
    /// Why `actor` may not close the session, if it may not.
    pub fn refusal(&self, name: &str, actor: Option<&str>) -> Option<String> {
        let why = if self.attached > 0 {
            format!(
                "a person is attached to it ({} client{})",
                self.attached,
                if self.attached == 1 { "" } else { "s" }
            )
        } else {
            match &self.running {
                Some((cmd, Some(who))) if Some(who.as_str()) != actor => {
                    format!("`{cmd}` runs in it, started by {who}")
                }
                Some((cmd, None)) => format!("`{cmd}` runs in it, typed by a person"),
                _ => return None,
            }
        };
        Some(format!(
            "session {name} is in use: {why}. It stays open; a person closes it with \
             `docent-terminal-mcp close --force {name}` (or POST /api/sessions/{name}/close {{\"force\": true}})"
        ))
    }
}

impl Terminal {
    /// Closes session `name` for `actor`, unless someone else uses it and
    /// `force` is off.
    pub async fn close_session(&self, name: &str, force: bool, actor: Option<&str>) -> Result<String, String> {
        if !force && let Some(why) = self.presence(name).await?.refusal(name, actor) {
            return Err(why);
        }
        let dir = self.sessions().close(name).await.map_err(|e| e.to_string())?;
        if !dir.exists() {
            return Ok(format!("session {name} closed; its logs were deleted, as it was marked"));
        }
        Ok(format!("session {name} closed; its log stays in {}", dir.display()))
    }

    /// Who uses session `name` now.
    pub async fn presence(&self, name: &str) -> Result<Presence, String> {
        let s = self.sessions().resolve(name).await.map_err(|e| e.to_string())?;
        let attached = self
            .sessions()
            .tmux
            .display(&s.pane.pane_id, "#{session_attached}")
            .await
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        let mut running = None;
        if let Ok(mut logger) = s.logger().await
            && let Ok(status) = logger.status().await
            && let Some(&open) = status.shell.open.first()
        {
            let cmd = match logger.region(open).await {
                Ok(Some(r)) => r.command,
                _ => "a command".to_string(),
            };
            running = Some((cmd, starter_of(&self.sessions().cfg.home, name, open)));
        }
        Ok(Presence { attached, running })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_who_uses_it_and_how_a_person_closes_it() {
        let p = Presence { attached: 1, running: None };
        let why = p.refusal("t1", Some("a")).expect("refused");
        assert!(why.contains("a person is attached") && why.contains("close --force t1"), "{why}");
        let p = Presence { attached: 0, running: Some(("make".into(), Some("b".into()))) };
        assert!(p.refusal("t1", Some("a")).expect("refused").contains("started by b"));
        assert_eq!(p.refusal("t1", Some("b")), None);
        let p = Presence { attached: 0, running: Some(("vi".into(), None)) };
        assert!(p.refusal("t1", Some("a")).expect("refused").contains("typed by a person"));
        assert_eq!(Presence::default().refusal("t1", None), None);
    }
}
