//! `/metrics` on `serve`: scraped with curl over the Unix socket (no
//! token) and over TCP (only with the token), and read by the Prometheus
//! client library's own text parser.

use std::collections::HashMap;
use std::process::{Command, Stdio};

use serde_json::json;

use crate::assert_has;
use crate::support::python::venv_with;
use crate::support::serve::tcp_http;
use crate::support::{Serve, World, bridge, free_port, poll, request};

/// The samples of a scrape as the Python `prometheus_client` parser reads
/// them: `name{k="v",…}` (labels sorted) to value.
fn parsed(python: &std::path::Path, text: &str) -> HashMap<String, f64> {
    let script = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        out[s.name + ("{" + labels + "}" if labels else "")] = s.value
print(json.dumps(out))
"#;
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), text.as_bytes()).expect("write");
    let out = child.wait_with_output().expect("python");
    assert!(out.status.success(), "the parser refused the scrape: {}\n{text}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn curl_unix(socket: &std::path::Path, path: &str) -> String {
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "10", "--unix-socket"])
        .arg(socket)
        .arg(format!("http://x{path}"))
        .output()
        .expect("curl");
    assert!(out.status.success(), "curl: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_scraped_and_parsed_by_the_prometheus_client() {
    crate::needs!("curl");
    crate::needs!("python3");
    let python = match venv_with("py-prometheus", "prometheus-client>=0.20,<1") {
        Ok(venv) => venv.join("bin/python"),
        Err(why) => {
            eprintln!("skipped: the Prometheus Python client is not available: {why}");
            return;
        }
    };
    let world = World::new();
    let port = free_port();
    let serve = Serve::start(&world, &["--tcp", &port.to_string()]);
    let agent = bridge(&world, "alice").await;
    assert!(!agent.call("session_create", json!({"name": "m1"})).await.is_error);
    let r = agent.call("run", json!({"session": "m1", "command": "echo metered-$((6*7))"})).await;
    assert!(!r.is_error, "{}", r.text);
    let refused = agent.call("run", json!({"session": "nosuch", "command": "true"})).await;
    assert!(refused.is_error, "{}", refused.text);

    let text = curl_unix(&serve.socket, "/metrics");
    let m = parsed(&python, &text);
    let get = |k: &str| m.get(k).copied().unwrap_or_else(|| panic!("no {k} in the scrape:\n{text}"));
    assert!(get(r#"dtmcp_calls_total{outcome="ok",tool="run"}"#) >= 1.0);
    assert!(get(r#"dtmcp_calls_total{outcome="ok",tool="session_create"}"#) >= 1.0);
    assert!(get(r#"dtmcp_calls_total{outcome="error",tool="run"}"#) >= 1.0, "{text}");
    assert!(get(r#"dtmcp_call_seconds_count{tool="run"}"#) >= 2.0);
    assert!(get(r#"dtmcp_call_seconds_bucket{le="+Inf",tool="run"}"#) >= 2.0);
    assert_eq!(get("dtmcp_sessions_open"), 1.0);
    assert!(get("dtmcp_logged_bytes") > 0.0);
    assert_eq!(get("dtmcp_agents_active"), 1.0);
    assert_eq!(get("dtmcp_waits_in_progress"), 0.0);
    assert_eq!(get("dtmcp_log_gaps"), 0.0);
    assert_eq!(get("dtmcp_policy_asks_pending"), 0.0);
    assert_eq!(get("dtmcp_logger_restarts_total"), 0.0);

    // A wait in progress is seen while it lasts.
    let waiting = agent.call("run", json!({"session": "m1", "command": "sleep 30", "timeout": 0.3})).await;
    assert!(!waiting.is_error, "{}", waiting.text);
    let waiter = bridge(&world, "bob").await;
    let held = tokio::spawn(async move {
        waiter.call("wait", json!({"session": "m1", "timeout": 3})).await;
        waiter
    });
    poll::until("a wait in progress counted", std::time::Duration::from_secs(3), || {
        let m = parsed(&python, &curl_unix(&serve.socket, "/metrics"));
        (m.get("dtmcp_waits_in_progress").copied().unwrap_or(0.0) >= 1.0).then_some(())
    });
    drop(held.await.expect("wait"));

    // Over TCP only with the token.
    let plain = request("GET", "/metrics", &[("host", &format!("127.0.0.1:{port}"))], "");
    assert_eq!(tcp_http(port, &plain).0, 401);
    let token = std::fs::read_to_string(world.home().join("token")).expect("token").trim().to_string();
    let bearer = format!("Bearer {token}");
    let with = request("GET", "/metrics", &[("host", &format!("127.0.0.1:{port}")), ("authorization", &bearer)], "");
    let (status, headers, body) = tcp_http(port, &with);
    assert_eq!(status, 200, "{body}");
    let kind = headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("content-type")).map(|(_, v)| v.as_str());
    assert_has!(kind.unwrap_or_default(), "text/plain; version=0.0.4");
    let m = parsed(&python, &body);
    assert!(m.contains_key("dtmcp_sessions_open"), "{body}");
}
