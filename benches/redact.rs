//! The cost of redaction on a reply of 20,000 characters: ordinary build
//! output (no keyword, so only the prefilter runs), output full of the
//! keywords (`token`, `password`, URLs) without secrets, and output with a
//! secret every 40 lines, against a floor measured in the same run (copying
//! the text, which any reply does anyway). The placeholder table is the
//! in-memory one; the router adds one small file read per reply.
//!
//! `cargo bench --bench redact`. Prints a table; asserts nothing.

use std::hint::black_box;
use std::time::Instant;

use dtmcp_core::redact::{Known, Table, redact};

const SIZE: usize = 20_000;
const ROUNDS: u32 = 2_000;

/// Lines repeated up to [`SIZE`] characters.
fn text(lines: &[&str]) -> String {
    let mut out = String::new();
    for (i, l) in lines.iter().cycle().enumerate() {
        if out.len() >= SIZE {
            break;
        }
        out.push_str(&format!("{:>5}  {l}\n", i + 1));
    }
    out.truncate(SIZE);
    out
}

/// The mean time of `f` over [`ROUNDS`] rounds, in microseconds.
fn time(mut f: impl FnMut()) -> f64 {
    for _ in 0..ROUNDS / 10 {
        f();
    }
    let start = Instant::now();
    for _ in 0..ROUNDS {
        f();
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(ROUNDS)
}

fn main() {
    let build = text(&[
        "   Compiling serde v1.0.210",
        "   Compiling regex-automata v0.4.9 (commit 9fceb02d0ae598e95dc970b74767f19372d61af8)",
        "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  target/release/app",
        "test parser::tests::numbers_round_trip ... ok",
    ]);
    let keywords = text(&[
        "fetching https://example.com/api/v1/items?page=2",
        "the token count is 4096 (secret sauce: none)",
        "Enter your password: ",
        "git@github.com:me/repo.git",
    ]);
    let mut lines = vec!["ordinary output line with words and numbers 12345"; 39];
    let secret = "GITHUB_TOKEN=ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";
    lines.push(secret);
    let secrets = text(&lines);
    let known = Known::from_env([("MY_DEPLOY_TOKEN", "plain-words-deploy-value")], &[]);

    println!("{:<36} {:>12} {:>12} {:>10}", "reply of 20,000 characters", "floor µs", "redact µs", "secrets");
    for (name, t) in [
        ("build output (no keyword)", &build),
        ("keywords, no secret", &keywords),
        ("a secret every 40 lines", &secrets),
    ] {
        let floor = time(|| {
            black_box(black_box(t.as_str()).to_string());
        });
        let mut table = Table::default();
        let mut found = 0;
        let cost = time(|| {
            let (out, counts) = redact(black_box(t), &known, &mut table);
            found = counts.total();
            black_box(out);
        });
        println!("{name:<36} {floor:>12.2} {cost:>12.2} {found:>10}");
    }
}
