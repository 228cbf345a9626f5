//! The router's rooms, checked from their own `use` paths: no file-level
//! import circle in the router, the core or the logger, and no arrow from a
//! room below the tools (sessions, agents, tmux, the people's command line,
//! the bridge, the call log…) up into `src/tools/`.
//!
//! The paths are read as text (`crate::`, `super::`, `self::` and one level
//! of `use a::{b, c}`), not through the compiler's name resolution, so a
//! name reached another way (a re-export, a macro) is not seen: the check
//! errs on the side of missing an arrow, never of inventing one. Unit tests
//! (from `#[cfg(test)]` on, which sits at the end of each file) and
//! comments are left out, since a test may look anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module, by its path from the crate root (`["tools", "typing", "run"]`).
type Module = Vec<String>;

/// The source trees checked, relative to the workspace root.
const TREES: [&str; 3] = ["src", "crates/dtmcp-core/src", "crates/dtmcp-logger/src"];

/// The router's rooms that serve the tools or drive them, and may name
/// `crate::tools`: everything else is below the tools.
const ABOVE_TOOLS: [&str; 5] = ["server", "web", "cli", "demo", "stdio"];

/// What a room above the tools may take from them: the server itself.
const TOOLS_FACADE: [&str; 1] = ["Terminal"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, as (module path, file).
fn modules(dir: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("readable source tree").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(dir).expect("under the tree").with_extension("");
                let mut parts: Module = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
                if parts.last().is_some_and(|l| ["mod", "lib", "main"].contains(&l.as_str())) {
                    parts.pop();
                }
                out.insert(parts, path);
            }
        }
    }
    out
}

/// The text of `file` that counts: up to its unit tests, without comments.
fn code_of(file: &Path) -> String {
    let text = std::fs::read_to_string(file).expect("readable source file");
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// The paths named in `code` that start at the crate, the parent or the
/// module itself, with `use a::{b, c::d}` expanded one level.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let at_word = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':');
        let rest = &code[i..];
        let head = ["crate::", "super::", "self::"].into_iter().find(|h| rest.starts_with(h));
        let Some(_) = head.filter(|_| at_word) else {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
        let path = rest[..end].trim_end_matches(':');
        let parts: Vec<String> = path.split("::").map(str::to_string).collect();
        if rest[end..].starts_with('{') && rest[..end].ends_with("::") {
            let close = rest[end..].find('}').map_or(rest.len(), |c| end + c);
            for item in rest[end + 1..close].split(',') {
                let item = item.split(" as ").next().unwrap_or_default().trim();
                if !item.is_empty() && item != "self" {
                    let mut p = parts.clone();
                    p.extend(item.split("::").map(str::to_string));
                    out.push(p);
                }
            }
        }
        out.push(parts);
        i += end.max(1);
    }
    out
}

/// The module `path` names, seen from module `here`: the longest prefix
/// that is a module of the tree.
fn resolve(path: &[String], here: &Module, mods: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    let (mut base, mut rest): (Module, &[String]) = match path.first()?.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        _ => (here.clone(), path),
    };
    while let Some(first) = rest.first() {
        match first.as_str() {
            "super" => {
                base.pop();
            }
            "self" => {}
            _ => break,
        }
        rest = &rest[1..];
    }
    (0..=rest.len()).rev().map(|n| [base.clone(), rest[..n].to_vec()].concat()).find(|m| mods.contains_key(m))
}

/// The file-level import graph of one crate: module → modules it names
/// (its ancestors aside: a child naming its parent is no arrow).
fn graph(mods: &BTreeMap<Module, PathBuf>) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut edges = BTreeMap::new();
    for (m, file) in mods {
        let to: BTreeSet<Module> = paths_in(&code_of(file))
            .iter()
            .filter_map(|p| resolve(p, m, mods))
            .filter(|t| t != m && !m.starts_with(t))
            .collect();
        edges.insert(m.clone(), to);
    }
    edges
}

/// The strongly connected sets of two or more modules (Tarjan).
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on: BTreeSet<&'a Module>,
        out: Vec<Vec<Module>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a Module) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        w.on.insert(v);
        for t in &w.edges[v] {
            if !w.index.contains_key(t) {
                visit(w, t);
                let low = w.low[v].min(w.low[t]);
                w.low.insert(v, low);
            } else if w.on.contains(t) {
                let low = w.low[v].min(w.index[t]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let mut set = Vec::new();
            while let Some(t) = w.stack.pop() {
                w.on.remove(t);
                set.push(t.clone());
                if t == v {
                    break;
                }
            }
            if set.len() > 1 {
                w.out.push(set);
            }
        }
    }
    let mut w = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    w.out
}

#[test]
fn no_file_imports_in_a_circle() {
    for tree in TREES {
        let mods = modules(&root().join(tree));
        assert!(mods.len() > 5, "{tree} was read: {} files", mods.len());
        let found: Vec<String> = circles(&graph(&mods))
            .into_iter()
            .map(|set| set.iter().map(|m| mods[m].display().to_string()).collect::<Vec<_>>().join(", "))
            .collect();
        assert!(
            found.is_empty(),
            "import circles in {tree}: move what the files share below both:\n{}",
            found.join("\n")
        );
    }
}

#[test]
fn no_room_below_the_tools_reaches_up_into_them() {
    let mods = modules(&root().join("src"));
    let mut up = Vec::new();
    for (m, file) in &mods {
        let room = m.first().map(String::as_str).unwrap_or_default();
        if room == "tools" || room.is_empty() {
            continue;
        }
        for path in paths_in(&code_of(file)) {
            if path.first().map(String::as_str) != Some("crate") || path.get(1).map(String::as_str) != Some("tools") {
                continue;
            }
            let facade = path.len() == 3 && TOOLS_FACADE.contains(&path[2].as_str());
            if !(ABOVE_TOOLS.contains(&room) && facade) {
                up.push(format!("{}: {}", file.display(), path.join("::")));
            }
        }
    }
    assert!(
        up.is_empty(),
        "rooms below the tools (or past the server's facade) name them; move what they need down:\n{}",
        up.join("\n")
    );
}

#[test]
fn the_check_sees_a_circle_and_an_arrow_up() {
    // The reader itself, on made-up text: a check that cannot fail is no check.
    let paths = paths_in("use crate::a::{b, c::d as e};\nfn f() { super::g::h(); x::crate::no; }");
    assert!(paths.contains(&vec!["crate".into(), "a".into(), "b".into()]), "{paths:?}");
    assert!(paths.contains(&vec!["crate".into(), "a".into(), "c".into(), "d".into()]), "{paths:?}");
    assert!(paths.contains(&vec!["super".into(), "g".into(), "h".into()]), "{paths:?}");
    let m = |s: &str| s.split('/').filter(|p| !p.is_empty()).map(str::to_string).collect::<Module>();
    let edges: BTreeMap<Module, BTreeSet<Module>> =
        [(m("a"), [m("b")].into()), (m("b"), [m("c")].into()), (m("c"), [m("a")].into()), (m("d"), BTreeSet::new())]
            .into();
    let found = circles(&edges);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].len(), 3);
}
