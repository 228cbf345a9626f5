//! The official MCP conformance suite against `serve` over HTTP on TCP:
//! every server scenario that needs no test tools of its own (the tools,
//! prompts and resources it names are a reference server's, not ours).

use crate::assert_has;
use crate::support::conformance::{CONFORMANCE, npx22, token_proxy, unreachable};
use crate::support::{Serve, World, free_port};

/// The scenarios our server can take: the handshake, ping, the tool list,
/// logging levels, concurrent streams and DNS-rebinding protection.
const SCENARIOS: [&str; 6] = [
    "server-initialize",
    "ping",
    "tools-list",
    "logging-set-level",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

#[test]
fn every_scenario_the_server_can_take_passes() {
    let npx = match npx22() {
        Ok(npx) => npx,
        Err(why) => return eprintln!("skipped: no Node 22 for the conformance suite: {why}"),
    };
    let world = World::new();
    let port = free_port();
    let _serve = Serve::start(&world, &["--tcp", &port.to_string()]);
    let token = std::fs::read_to_string(world.home().join("token")).expect("token").trim().to_string();
    let front = token_proxy(port, token);
    let url = format!("http://localhost:{front}/mcp");
    let results = world.tmp.path().join("conformance");
    let results = results.display().to_string();
    for scenario in SCENARIOS {
        let ran = npx.run(CONFORMANCE, &["server", "--url", &url, "--scenario", scenario, "-o", &results]);
        let said = format!("{}\n{}", ran.stdout, ran.stderr);
        if unreachable(&said) && !said.contains("Test Results") {
            return eprintln!("skipped: the conformance suite could not be fetched (no network?):\n{said}");
        }
        assert!(ran.success(), "{scenario} failed:\n{said}");
        assert_has!(said, " 0 failed");
        assert!(!said.contains("Passed: 0/0"), "{scenario} checked nothing:\n{said}");
    }
}
