//! `search`, `regions`, region files, and reading a closed session's logs.

use serde_json::json;

use crate::assert_has;
use crate::support::{Server, World};

/// Runs `command` and returns the region id its reply names.
async fn run_region(s: &Server, session: &str, command: &str) -> u64 {
    let r = s.run(session, command).await;
    r.split(" · region ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no region in:\n{r}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_counts_pages_and_names_regions() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    // The command lines hold "row%g", which the pattern does not match.
    let a = run_region(&s, "t1", "seq -f 'row%g' 1 30").await;
    let b = run_region(&s, "t1", "seq -f 'row%g' 100 104; false").await;
    let all = s.ok("search", json!({"session": "t1", "pattern": "^row[0-9]+$"})).await;
    assert_has!(all, "35 lines of the log");
    assert_has!(all, format!("[region {a} `seq -f 'row%g' 1 30`]"));
    assert_has!(all, "hits 1-20 of 35; next page: search session=t1 pattern=\"^row[0-9]+$\" offset=20");
    assert!(all.lines().any(|l| l.ends_with(": row1")), "{all}");
    let next = s.ok("search", json!({"session": "t1", "pattern": "^row[0-9]+$", "offset": 20})).await;
    assert_has!(next, "hits 21-35 of 35");
    assert_has!(next, format!("[region {b} "));
    assert!(next.lines().any(|l| l.ends_with(": row104")), "{next}");
    // Within one region, with context marked apart from hits.
    let one = s.ok("search", json!({"session": "t1", "pattern": "row102", "region": b, "context": 1})).await;
    assert_has!(one, format!("1 line of region {b}"));
    assert!(one.lines().any(|l| l.ends_with("- row101")), "{one}");
    assert!(one.lines().any(|l| l.ends_with(": row102")), "{one}");
    assert!(one.lines().any(|l| l.ends_with("- row103")), "{one}");
    assert!(!one.contains("row100"), "{one}");
    let label = one.find("[region").expect("a region label");
    assert!(label < one.find("- row101").expect("context"), "the label leads its group:\n{one}");
    let bad = s.err("search", json!({"session": "t1", "pattern": "row("})).await;
    assert_has!(bad, "invalid pattern");
    assert_has!(bad, "unclosed group");
    assert_has!(s.err("search", json!({"session": "t1", "pattern": "x", "region": 999})).await, "has no region 999");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regions_list_failures_and_reading_writes_the_region_file() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let ok = run_region(&s, "t1", "seq 1 3").await;
    let bad = run_region(&s, "t1", "(exit 7)").await;
    let list = s.ok("regions", json!({"session": "t1"})).await;
    assert_has!(list, format!("#{ok} exit 0"));
    assert_has!(list, format!("#{bad} exit 7"));
    let failed = s.ok("regions", json!({"session": "t1", "failed_only": true})).await;
    assert_has!(failed, format!("#{bad} exit 7"));
    assert!(!failed.contains(&format!("#{ok} ")), "{failed}");
    // Reading a region writes its file; reading it again writes it again.
    let file = w.session_dir("t1").join("regions").join(format!("{ok:04}.txt"));
    assert_has!(s.ok("read", json!({"session": "t1", "region": ok})).await, file.display().to_string());
    assert_eq!(std::fs::read_to_string(&file).expect("region file"), "1\n2\n3\n");
    std::fs::remove_file(&file).expect("remove");
    s.ok("read", json!({"session": "t1", "region": ok})).await;
    assert!(file.is_file(), "read did not write the region file again");
    assert_has!(s.ok("regions", json!({"session": "t1"})).await, format!("regions/{ok:04}.txt"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_of_a_region_reads_as_its_reply_hints() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    s.run("t1", "echo before").await;
    let r = s.run("t1", "seq -f 'row%g' 1 500").await;
    // The clipped reply names the region and the lines left out.
    let hint = r.split("(or from_line=").nth(1).expect("a hint");
    let first: u64 = hint.split_whitespace().next().and_then(|n| n.parse().ok()).expect("from_line");
    let region = r.split(" · region ").nth(1).and_then(|t| t.split_whitespace().next()).expect("region");
    let region: u64 = region.parse().expect("a number");
    let args = json!({"session": "t1", "region": region, "from_line": first, "to_line": first + 2});
    let part = s.ok("read", args).await;
    assert_has!(part, format!("region {region} `seq -f 'row%g' 1 500` · lines {first}-{}", first + 2));
    assert_eq!(part.lines().filter(|l| l.contains("row")).count(), 4, "{part}");
    // Only to_line: from the region's start; a range reaching past it is cut to it.
    let head = s.ok("read", json!({"session": "t1", "region": region, "from_line": 1, "to_line": first})).await;
    assert!(!head.contains("before"), "{head}");
    assert!(head.lines().any(|l| l.ends_with("  row1")), "{head}");
    // 500 lines: past 400 the reply says how to go on within the region.
    let all = s.ok("read", json!({"session": "t1", "region": region})).await;
    assert_has!(all, format!("… more: read session=t1 region={region} from_line="));
    let outside = s.err("read", json!({"session": "t1", "region": region, "from_line": 1, "to_line": 2})).await;
    assert_has!(outside, format!("are not in region {region}, which holds lines"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_session_can_still_be_read_searched_and_listed() {
    let w = World::new();
    let s = w.server().await;
    s.create("gone").await;
    let r = run_region(&s, "gone", "seq -f 'kept%g' 1 5; (exit 3)").await;
    s.ok("session_close", json!({"session": "gone"})).await;
    let found = s.ok("search", json!({"session": "gone", "pattern": "^kept[0-9]$"})).await;
    assert_has!(found, "5 lines of the log");
    let read = s.ok("read", json!({"session": "gone", "region": r})).await;
    assert_has!(read, "is closed");
    assert_has!(read, "kept5");
    let tail = s.ok("read", json!({"session": "gone"})).await;
    assert_has!(tail, "kept3");
    assert_has!(s.ok("regions", json!({"session": "gone"})).await, format!("#{r} exit 3"));
    assert_has!(s.err("search", json!({"session": "never", "pattern": "x"})).await, "open or closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clipped_run_writes_its_region_file_and_says_where() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let said = s.run("t1", "seq 1 5000").await;
    let files: Vec<_> = std::fs::read_dir(w.session_dir("t1").join("regions"))
        .expect("regions dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_has!(said, files[0].display().to_string());
    let text = std::fs::read_to_string(&files[0]).expect("region file");
    assert_eq!(text.lines().count(), 5000);
    assert!(text.starts_with("1\n2\n") && text.ends_with("4999\n5000\n"), "{}", &text[..20]);
    // A short output is shown whole, and no file is written for it.
    let short = s.run("t1", "echo short").await;
    assert!(!short.contains("regions/"), "{short}");
}

/// Over 16 MiB, a clipped reply does not copy its region: it names the
/// region's lines in `session.txt`, and those lines are the output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clipped_run_over_16_mib_names_its_lines_instead_of_copying_them() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    // 20.9 MB of output.
    let said = s.ok("run", json!({"session": "t1", "command": "seq 1 3000000", "timeout": 120})).await;
    let dir = w.session_dir("t1");
    let text = dir.join("session.txt");
    let named = format!(" of {} (", text.display());
    let line = said.lines().find(|l| l.contains(&named)).unwrap_or_else(|| panic!("no line range named:\n{said}"));
    let range = line.strip_prefix("the whole region is lines ").and_then(|r| r.split(' ').next()).expect("a range");
    let (a, b) = range.split_once('-').expect("A-B");
    let (a, b): (usize, usize) = (a.parse().expect("A"), b.parse().expect("B"));
    assert_has!(line, "read region=");
    let files = std::fs::read_dir(dir.join("regions")).map(|d| d.flatten().count()).unwrap_or(0);
    assert_eq!(files, 0, "a region file was written: {said}");
    let all = std::fs::read_to_string(&text).expect("session.txt");
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(b - a + 1, 3_000_000, "{line}");
    assert_eq!((lines[a - 1], lines[b - 1]), ("1", "3000000"), "{line}");
}

/// The peak resident memory of process `pid`, in MiB.
fn peak_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kb = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).expect("VmHWM");
    kb.trim().trim_end_matches("kB").trim().parse::<u64>().expect("a number") / 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pattern_that_runs_over_line_breaks_costs_one_pass_and_a_huge_one_is_refused_cheaply() {
    let w = World::new();
    let s = w.server().await;
    s.create("big").await;
    s.ok("run", json!({"session": "big", "command": "seq 1 300000", "last_lines": 1})).await;
    // `\s` took the line break, and each line's search scanned to the end
    // of its block: 81-90 s over MCP on 300,000 lines. One pass now.
    let started = std::time::Instant::now();
    let found = s.ok("search", json!({"session": "big", "pattern": r"(\w+\s*)*$", "max_hits": 1})).await;
    let took = started.elapsed();
    assert!(!found.contains("stopped after"), "{found}");
    let total: u64 = found.split(' ').next().and_then(|n| n.parse().ok()).expect("a count");
    assert!(total >= 300_000, "{found}");
    assert!(took < std::time::Duration::from_secs(8), "the search took {took:?}");
    // A pattern of 3.9 MB is refused by its length, before the parser
    // could take hundreds of megabytes over it.
    let before = peak_mib(s.pid());
    let huge = "(a|b)".repeat(780_000);
    let refused = s.err("search", json!({"session": "big", "pattern": huge})).await;
    assert_has!(refused, "at most 4096 bytes");
    let after = peak_mib(s.pid());
    assert!(after < before + 100, "the peak went from {before} MiB to {after} MiB");
}
