//! Tool input schemas that every MCP client can load.
//!
//! rmcp derives each tool's `inputSchema` with schemars' draft 2020-12
//! settings, and those are fixed inside rmcp. What schemars writes is valid
//! JSON Schema, but several of its spellings are dropped or refused by the
//! clients that translate tool schemas into a narrower dialect (Gemini's
//! function declarations, OpenAPI-style converters in agent frameworks):
//!
//! - an `Option<T>` becomes `"type": ["T", "null"]`, or an `anyOf` with a
//!   `{"type": "null"}` branch for a struct, with `"default": null`;
//! - a struct used twice is written once under `$defs` and pointed at with
//!   `$ref`, which some clients never resolve;
//! - a unit enum becomes a `oneOf` of `const`s;
//! - numbers carry schemars' own formats (`uint64`, `uint16`, `double`);
//! - the root names its dialect with `$schema`, which some APIs refuse as an
//!   unknown field.
//!
//! [`portable`] rewrites every tool's schema once, where the tools are
//! combined, into the plain subset they all read: every node has one
//! `type`; an optional parameter is simply left out of `required`;
//! definitions are inlined; an enum of strings is an `enum`. The contract
//! does not change: the parameter structs still deserialize the arguments
//! (and still take an explicit `null` for an optional one, as absent).
//!
//! [`problems`] names what a portable schema must not contain. It holds the
//! rules of the official MCP Inspector's `--strict` check (version 2.12:
//! `type-union`, `boolean-schema`, `remote-ref`, `untyped-schema`) and the
//! stricter ones above; the unit tests run it over every tool.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use serde_json::{Map, Value};

/// Keywords whose value is one subschema.
const ONE: [&str; 9] =
    ["items", "additionalProperties", "not", "contains", "if", "then", "else", "propertyNames", "contentSchema"];
/// Keywords whose value is a list of subschemas.
const LIST: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords whose value maps names to subschemas.
const MAP: [&str; 5] = ["properties", "patternProperties", "dependentSchemas", "$defs", "definitions"];
/// Keywords that leave a clause a client without `anyOf` support cannot read.
const COMBINATORS: [&str; 4] = ["anyOf", "oneOf", "allOf", "not"];
/// Keywords where a bare `true` or `false` is a legal subschema.
const BOOLEAN_OK: [&str; 4] = ["additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems"];

/// Rewrites the input schema of every tool in `router` into the portable
/// subset (see the module doc).
pub(super) fn portable<S>(mut router: ToolRouter<S>) -> ToolRouter<S> {
    for route in router.map.values_mut() {
        let mut schema = Value::Object(route.attr.input_schema.as_ref().clone());
        make_portable(&mut schema);
        if let Value::Object(object) = schema {
            route.attr.input_schema = Arc::new(object);
        }
    }
    router
}

/// Rewrites one root schema in place. A definition that refers to itself
/// cannot be inlined; it keeps its `$ref` and its `$defs` entry (and
/// [`problems`] then names it).
pub fn make_portable(root: &mut Value) {
    let Value::Object(object) = root else { return };
    object.remove("$schema");
    let mut defs = BTreeMap::new();
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(map)) = object.remove(key) {
            defs.extend(map.into_iter().map(|(name, def)| (format!("#/{key}/{name}"), def)));
        }
    }
    let mut path = Vec::new();
    tidy(root, &defs, &mut path);
    if has_ref(root) {
        restore_defs(root, defs);
    }
}

/// Puts back the definitions a recursive `$ref` still needs, each tidied,
/// under the keyword they came from.
fn restore_defs(root: &mut Value, defs: BTreeMap<String, Value>) {
    let Value::Object(object) = root else { return };
    for (pointer, mut def) in defs.clone() {
        let mut path = vec![pointer.clone()];
        tidy(&mut def, &defs, &mut path);
        let Some((key, name)) = pointer.trim_start_matches("#/").split_once('/') else { continue };
        let kept = object.entry(key).or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(kept) = kept {
            kept.insert(name.to_string(), def);
        }
    }
}

/// Rewrites `node` and everything under it. `path` holds the definitions
/// being inlined around `node`, so that a recursive one stops.
fn tidy(node: &mut Value, defs: &BTreeMap<String, Value>, path: &mut Vec<String>) {
    let Value::Object(object) = node else { return };
    if let Some(pointer) = inlinable(object, defs, path) {
        object.remove("$ref");
        fill(object, &defs[&pointer]);
        path.push(pointer);
        tidy(node, defs, path);
        path.pop();
        return;
    }
    if unwrap_nullable(object) {
        tidy(node, defs, path);
        return;
    }
    drop_null_type(object);
    strings_as_enum(object);
    drop_foreign_format(object);
    for_each_child(object, |child| tidy(child, defs, path));
}

/// The definition `object`'s `$ref` names, when it is local and not one
/// already being inlined.
fn inlinable(object: &Map<String, Value>, defs: &BTreeMap<String, Value>, path: &[String]) -> Option<String> {
    let pointer = object.get("$ref")?.as_str()?;
    (defs.contains_key(pointer) && !path.iter().any(|p| p == pointer)).then(|| pointer.to_string())
}

/// Copies every keyword of `from` that `into` does not have: the schema at
/// the point of use (its description, its default) wins over the definition.
fn fill(into: &mut Map<String, Value>, from: &Value) {
    if let Value::Object(from) = from {
        for (key, value) in from {
            into.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
}

/// Drops the `{"type": "null"}` branches of an `anyOf` or `oneOf`; a single
/// branch left takes the combinator's place. Says whether it changed
/// `object` in a way that needs another look.
fn unwrap_nullable(object: &mut Map<String, Value>) -> bool {
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(branches)) = object.get_mut(key) else { continue };
        let before = branches.len();
        branches.retain(|b| !is_null_type(b));
        if branches.len() == before {
            continue;
        }
        forget_null_default(object);
        if let Some(Value::Array(mut branches)) = object.remove(key) {
            if branches.len() == 1 {
                fill(object, &branches.remove(0));
            } else {
                object.insert(key.into(), Value::Array(branches));
            }
        }
        return true;
    }
    false
}

/// Whether `schema` is the branch `{"type": "null"}` (with nothing else but
/// a description).
fn is_null_type(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
        && schema.as_object().is_some_and(|o| o.keys().all(|k| k == "type" || k == "description"))
}

/// `"type": ["T", "null"]` becomes `"type": "T"`; an optional parameter is
/// one left out of `required`, not one that may be `null`.
fn drop_null_type(object: &mut Map<String, Value>) {
    let Some(Value::Array(types)) = object.get_mut("type") else { return };
    let before = types.len();
    types.retain(|t| t != "null");
    if types.len() == before {
        return;
    }
    if types.len() == 1 {
        let single = types.remove(0);
        object.insert("type".into(), single);
    }
    forget_null_default(object);
}

/// A `"default": null` says nothing once `null` is no longer a value.
fn forget_null_default(object: &mut Map<String, Value>) {
    if object.get("default") == Some(&Value::Null) {
        object.remove("default");
    }
}

/// A `oneOf` or `anyOf` of string `const`s (schemars' spelling of a unit
/// enum whose variants have doc comments) becomes `"type": "string"` with
/// an `enum`. The variants' own descriptions go; the parameter's stays.
fn strings_as_enum(object: &mut Map<String, Value>) {
    for key in ["oneOf", "anyOf"] {
        let Some(Value::Array(branches)) = object.get(key) else { continue };
        let names: Option<Vec<Value>> = branches
            .iter()
            .map(|b| {
                let only_const = b.as_object()?.keys().all(|k| matches!(k.as_str(), "const" | "type" | "description"));
                let string = b.get("type").is_none_or(|t| t == "string");
                b.get("const").filter(|c| c.is_string() && only_const && string).cloned()
            })
            .collect();
        if let Some(names) = names.filter(|n| !n.is_empty()) {
            object.remove(key);
            object.insert("type".into(), Value::String("string".into()));
            object.insert("enum".into(), Value::Array(names));
            return;
        }
    }
}

/// JSON Schema defines no format for numbers; the ones schemars writes
/// (`uint64`, `uint16`, `double`) are its own, and dialects that know
/// formats reject the unknown ones. `minimum` and `maximum` keep the range.
fn drop_foreign_format(object: &mut Map<String, Value>) {
    let numeric = matches!(object.get("type").and_then(Value::as_str), Some("integer" | "number"));
    if numeric {
        object.remove("format");
    }
}

/// Calls `visit` on every direct subschema of `object`.
fn for_each_child(object: &mut Map<String, Value>, mut visit: impl FnMut(&mut Value)) {
    for (key, value) in object.iter_mut() {
        match (key.as_str(), value) {
            (k, Value::Array(list)) if LIST.contains(&k) || k == "items" => list.iter_mut().for_each(&mut visit),
            (k, Value::Object(map)) if MAP.contains(&k) => map.values_mut().for_each(&mut visit),
            (k, child) if ONE.contains(&k) => visit(child),
            _ => {}
        }
    }
}

/// Whether a `$ref` is left anywhere under `node`.
fn has_ref(node: &Value) -> bool {
    match node {
        Value::Object(object) => object.contains_key("$ref") || object.values().any(has_ref),
        Value::Array(list) => list.iter().any(has_ref),
        _ => false,
    }
}

/// What makes `schema` unportable, one line each, with the path where it
/// is (`properties.typing.properties.speed`).
pub fn problems(schema: &Value) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(object) = schema.as_object() {
        for key in ["$schema", "$defs", "definitions"] {
            if object.contains_key(key) {
                found.push(format!("(root): `{key}`"));
            }
        }
    }
    check(schema, "", None, &mut found);
    found
}

/// Checks one node (reached through keyword `via`) and everything under it.
fn check(node: &Value, at: &str, via: Option<&str>, found: &mut Vec<String>) {
    let here = if at.is_empty() { "(root)" } else { at };
    let object = match node {
        Value::Bool(_) if via.is_some_and(|k| BOOLEAN_OK.contains(&k)) => return,
        Value::Bool(b) => return found.push(format!("{here}: a bare `{b}` where a schema belongs")),
        Value::Object(object) => object,
        _ => return,
    };
    for problem in node_problems(object) {
        found.push(format!("{here}: {problem}"));
    }
    for_each_child_named(object, |step, child| check(child, &join(at, &step), Some(keyword(&step)), found));
}

/// The problems of one schema node, not looking below it.
fn node_problems(object: &Map<String, Value>) -> Vec<String> {
    let mut found = Vec::new();
    let ty = object.get("type");
    match ty {
        Some(Value::String(t)) if t == "null" => found.push("`type` is null".to_string()),
        Some(Value::String(_)) => {}
        Some(other) => found.push(format!("`type` is {other}, not one type")),
        None if !object.contains_key("$ref") => found.push("no `type`".to_string()),
        None => {}
    }
    if let Some(r) = object.get("$ref") {
        found.push(format!("`$ref` {r} (not inlined)"));
    }
    found.extend(COMBINATORS.iter().filter(|k| object.contains_key(**k)).map(|k| format!("`{k}`")));
    if object.get("default") == Some(&Value::Null) {
        found.push("`default` is null".to_string());
    }
    let numeric = matches!(ty.and_then(Value::as_str), Some("integer" | "number"));
    if let Some(format) = object.get("format").filter(|_| numeric) {
        found.push(format!("`format` {format} on a number"));
    }
    let array = ty.and_then(Value::as_str) == Some("array");
    if array && !object.contains_key("items") {
        found.push("an array without `items`".to_string());
    }
    let not_object = ty.and_then(Value::as_str).is_some_and(|t| t != "object");
    if not_object && (object.contains_key("properties") || object.contains_key("required")) {
        found.push("`properties` or `required` on a non-object".to_string());
    }
    found.extend(unknown_required(object));
    found
}

/// Names in `required` that `properties` does not declare.
fn unknown_required(object: &Map<String, Value>) -> Vec<String> {
    let Some(Value::Array(required)) = object.get("required") else { return Vec::new() };
    let declared = object.get("properties").and_then(Value::as_object);
    let missing = required.iter().filter_map(Value::as_str).filter(|n| !declared.is_some_and(|d| d.contains_key(*n)));
    missing.map(|n| format!("required `{n}` is not a property")).collect()
}

/// Like [`for_each_child`], also handing over each child's path step
/// (`properties.name`, `anyOf[1]`, `items`).
fn for_each_child_named(object: &Map<String, Value>, mut visit: impl FnMut(String, &Value)) {
    for (key, value) in object.iter() {
        match (key.as_str(), value) {
            (k, Value::Array(list)) if LIST.contains(&k) || k == "items" => {
                list.iter().enumerate().for_each(|(i, c)| visit(format!("{k}[{i}]"), c))
            }
            (k, Value::Object(map)) if MAP.contains(&k) => map.iter().for_each(|(n, c)| visit(format!("{k}.{n}"), c)),
            (k, child) if ONE.contains(&k) => visit(k.to_string(), child),
            _ => {}
        }
    }
}

/// The keyword a path step starts with.
fn keyword(step: &str) -> &str {
    step.split(['.', '[']).next().unwrap_or(step)
}

/// `at` and one more step.
fn join(at: &str, step: &str) -> String {
    if at.is_empty() { step.to_string() } else { format!("{at}.{step}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Terminal;
    use rstest::rstest;
    use serde_json::json;

    #[test]
    fn every_tool_schema_is_portable() {
        let tools = Terminal::router().list_all();
        assert!(tools.len() >= 12, "{} tools", tools.len());
        let mut found = Vec::new();
        for tool in &tools {
            let schema = Value::Object(tool.input_schema.as_ref().clone());
            found.extend(problems(&schema).into_iter().map(|p| format!("{}: {p}", tool.name)));
        }
        assert!(found.is_empty(), "unportable tool schemas:\n{}", found.join("\n"));
    }

    /// The rewrite keeps every tool's contract: the same parameters, the
    /// same required ones, each with the type it had besides `null`.
    #[test]
    fn every_tool_keeps_its_parameters_and_what_is_required() {
        let raw = Terminal::routes().list_all();
        let done = Terminal::router().list_all();
        assert_eq!(raw.len(), done.len());
        for (raw, done) in raw.iter().zip(&done) {
            let (a, b) =
                (Value::Object(raw.input_schema.as_ref().clone()), Value::Object(done.input_schema.as_ref().clone()));
            assert_eq!(a.get("required"), b.get("required"), "{}: required", raw.name);
            let names = |s: &Value| s["properties"].as_object().map(|p| p.keys().cloned().collect::<Vec<_>>());
            assert_eq!(names(&a), names(&b), "{}: parameters", raw.name);
            for (name, before) in a["properties"].as_object().into_iter().flatten() {
                let after = &b["properties"][name]["type"];
                match &before["type"] {
                    Value::Array(types) => {
                        assert!(types.contains(after), "{}.{name}: {after} not in {types:?}", raw.name)
                    }
                    Value::String(_) => assert_eq!(&before["type"], after, "{}.{name}", raw.name),
                    _ => assert!(after.is_string(), "{}.{name} has no single type", raw.name),
                }
            }
        }
    }

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    enum Mode {
        /// The first.
        Fast,
        /// The second.
        Slow,
    }

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        /// A count.
        count: Option<u32>,
        tags: Option<Vec<String>>,
    }

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Outer {
        name: String,
        /// Said at the point of use.
        inner: Option<Inner>,
        list: Vec<Inner>,
        mode: Mode,
        env: Option<std::collections::HashMap<String, String>>,
    }

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Tree {
        children: Vec<Tree>,
    }

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Forest {
        trees: Vec<Tree>,
    }

    /// What rmcp hands over for `T`.
    fn rmcp_schema<T: schemars::JsonSchema + 'static>() -> Value {
        let schema = rmcp::handler::server::common::schema_for_input::<T>().expect("an object schema");
        Value::Object(schema.as_ref().clone())
    }

    #[test]
    fn schemars_output_becomes_plain_types_and_inlined_objects() {
        let mut schema = rmcp_schema::<Outer>();
        assert!(!problems(&schema).is_empty(), "the raw schema should need the rewrite");
        make_portable(&mut schema);
        assert_eq!(problems(&schema), Vec::<String>::new(), "{schema:#}");
        let props = &schema["properties"];
        assert_eq!(props["inner"]["type"], "object");
        assert_eq!(props["inner"]["description"], "Said at the point of use.");
        assert_eq!(
            props["inner"]["properties"]["count"],
            json!({"type": "integer", "minimum": 0, "description": "A count."})
        );
        assert_eq!(props["inner"]["properties"]["tags"]["type"], "array");
        assert_eq!(props["list"]["items"]["properties"]["count"]["type"], "integer");
        assert_eq!(props["mode"]["enum"], json!(["Fast", "Slow"]));
        assert_eq!(props["mode"]["type"], "string");
        assert_eq!(props["env"]["type"], "object");
        assert_eq!(props["env"]["additionalProperties"], json!({"type": "string"}));
        assert_eq!(schema["required"], json!(["name", "list", "mode"]));
    }

    #[test]
    fn a_recursive_definition_keeps_its_ref_and_is_named() {
        let mut schema = rmcp_schema::<Forest>();
        make_portable(&mut schema);
        assert!(schema.get("$defs").is_some_and(|d| d.get("Tree").is_some()), "{schema:#}");
        assert_eq!(schema["properties"]["trees"]["items"]["type"], "object", "{schema:#}");
        let found = problems(&schema);
        assert!(found.iter().any(|p| p.contains("`$ref` \"#/$defs/Tree\"")), "{found:?}");
        // A root that refers to itself says `#`; nothing to inline, still named.
        let mut schema = rmcp_schema::<Tree>();
        make_portable(&mut schema);
        assert!(problems(&schema).iter().any(|p| p.contains("`$ref` \"#\"")), "{schema:#}");
    }

    /// Each of the Inspector's rules and ours, on a schema that breaks it:
    /// the check must name it.
    #[rstest]
    #[case::type_union(json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}), "not one type")]
    #[case::boolean_schema(json!({"type": "object", "properties": {"a": true}}), "bare `true`")]
    #[case::remote_ref(json!({"type": "object", "properties": {"a": {"$ref": "https://example.org/s.json"}}}), "$ref")]
    #[case::local_ref(json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}), "$ref")]
    #[case::untyped(json!({"type": "object", "properties": {"a": {"description": "anything"}}}), "no `type`")]
    #[case::any_of(json!({"type": "object", "properties": {"a": {"type": "string", "anyOf": [{"type": "string"}]}}}), "`anyOf`")]
    #[case::one_of(json!({"type": "object", "oneOf": [{"type": "object"}]}), "`oneOf`")]
    #[case::dialect(json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}), "$schema")]
    #[case::defs(json!({"type": "object", "$defs": {"A": {"type": "string"}}}), "$defs")]
    #[case::null_default(json!({"type": "object", "properties": {"a": {"type": "string", "default": null}}}), "default")]
    #[case::number_format(json!({"type": "object", "properties": {"a": {"type": "integer", "format": "uint64"}}}), "format")]
    #[case::bare_array(json!({"type": "object", "properties": {"a": {"type": "array"}}}), "without `items`")]
    #[case::deep_union(json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": ["object", "null"]}}}}), "properties.a.items")]
    #[case::required_ghost(json!({"type": "object", "required": ["b"], "properties": {}}), "required `b`")]
    fn the_check_names_what_breaks_a_rule(#[case] schema: Value, #[case] named: &str) {
        let found = problems(&schema);
        assert!(found.iter().any(|p| p.contains(named)), "expected {named:?} among {found:?}");
    }

    #[test]
    fn booleans_where_the_spec_allows_them_pass() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false});
        assert_eq!(problems(&schema), Vec::<String>::new());
    }
}
