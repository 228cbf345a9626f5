//! Arguments that do not fit a tool, said in terms of the argument.
//!
//! rmcp deserializes a call's arguments into the tool's parameter struct
//! and, when that fails, answers with serde's message: "failed to
//! deserialize parameters: invalid value: integer `-3`, expected u64".
//! It names neither the argument nor what it takes. [`explain`] finds the
//! argument at fault in the tool's own (portable, see `schema.rs`) input
//! schema, which has one `type` per property, and says what it takes;
//! where it finds nothing, serde's words stay, after the tool's name.
//!
//! Written by hand rather than with a JSON Schema validator: the schemas
//! are our own and flat (a type, an enum, a minimum per property), and
//! the answer is one sentence about one argument, not a list of
//! violations.

use serde_json::{Map, Value};

/// rmcp's prefix of a message about arguments that did not deserialize.
pub const DESERIALIZE_PREFIX: &str = "failed to deserialize parameters:";

/// What is wrong with `args` for `tool`, whose input schema is `schema`,
/// given serde's message `serde`; the whole message for the agent.
pub fn explain(tool: &str, schema: &Map<String, Value>, args: Option<&Map<String, Value>>, serde: &str) -> String {
    let empty = Map::new();
    let props = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let args = args.unwrap_or(&empty);
    let problem = args.iter().find_map(|(key, value)| match props.get(key) {
        None => {
            let names: Vec<&str> = props.keys().map(String::as_str).collect();
            let meant = nearest(key, &names).map(|n| format!(" (`{n}`?)")).unwrap_or_default();
            Some(format!("`{key}` is not an argument of {tool}{meant}; it takes {}", names.join(", ")))
        }
        Some(prop) => misfit(prop, value).map(|takes| format!("`{key}` takes {takes}, not {}", shown(value))),
    });
    let missing = || {
        let required = schema.get("required").and_then(Value::as_array)?;
        let key = required.iter().filter_map(Value::as_str).find(|k| !args.contains_key(*k))?;
        let takes = props.get(key).and_then(takes).map(|t| format!(" ({t})")).unwrap_or_default();
        Some(format!("{tool} needs `{key}`{takes}"))
    };
    match problem.or_else(missing) {
        Some(problem) => format!("{problem}. Nothing was done (tools/list gives each argument's type and meaning)"),
        None => {
            let detail = serde.strip_prefix(DESERIALIZE_PREFIX).unwrap_or(serde).trim();
            format!("{tool}'s arguments do not fit it: {detail}. Nothing was done")
        }
    }
}

/// The name among `names` that `key` most likely meant: one it begins or
/// that begins it (`save` for `save_to`), else one a short edit away.
fn nearest<'a>(key: &str, names: &[&'a str]) -> Option<&'a str> {
    let key = key.to_ascii_lowercase();
    let prefix = names.iter().find(|n| key.len() >= 3 && (n.starts_with(&key) || key.starts_with(**n)));
    let close = || {
        let scored = names.iter().map(|n| (strsim::damerau_levenshtein(&key, n), *n));
        scored.filter(|(d, n)| *d <= 2 && *d < n.len().min(key.len())).min_by_key(|(d, _)| *d).map(|(_, n)| n)
    };
    prefix.copied().or_else(close)
}

/// What `prop` takes, when `value` is not that (`None` when it fits, or
/// when the schema does not say).
fn misfit(prop: &Value, value: &Value) -> Option<String> {
    if value.is_null() {
        return None;
    }
    let takes = takes(prop)?;
    let fits = match prop.get("type").and_then(Value::as_str)? {
        "integer" => {
            let min = prop.get("minimum").and_then(Value::as_f64);
            (value.is_i64() || value.is_u64()) && min.is_none_or(|m| value.as_f64().is_some_and(|v| v >= m))
        }
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => {
            let items = prop.get("items");
            value.as_array().is_some_and(|a| a.iter().all(|v| items.is_none_or(|i| misfit(i, v).is_none())))
        }
        "string" => {
            let allowed = prop.get("enum").and_then(Value::as_array);
            value.as_str().is_some() && allowed.is_none_or(|a| a.contains(value))
        }
        _ => true,
    };
    (!fits).then_some(takes)
}

/// `prop`'s type in words.
fn takes(prop: &Value) -> Option<String> {
    Some(match prop.get("type").and_then(Value::as_str)? {
        "integer" => match prop.get("minimum").and_then(Value::as_f64) {
            Some(m) => format!("a whole number ≥ {m}"),
            None => "a whole number".into(),
        },
        "number" => "a number".into(),
        "boolean" => "true or false".into(),
        "object" => "an object".into(),
        "array" => match prop.get("items").and_then(takes) {
            Some(item) => format!("a list, each item {item}"),
            None => "a list".into(),
        },
        "string" => match prop.get("enum").and_then(Value::as_array) {
            Some(allowed) => {
                let names: Vec<String> = allowed.iter().map(Value::to_string).collect();
                format!("one of {}", names.join(", "))
            }
            None => "a string".into(),
        },
        _ => return None,
    })
}

/// A value as the message shows it: its JSON, shortened.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(40) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Map<String, Value> {
        let s = json!({
            "type": "object",
            "properties": {
                "session": {"type": "string"},
                "from_line": {"type": "integer", "minimum": 0},
                "view": {"type": "string", "enum": ["cooked", "screen", "raw"]},
                "keys": {"type": "array", "items": {"type": "string"}},
                "wait": {"type": "number"},
                "take_over": {"type": "boolean"}
            },
            "required": ["session"]
        });
        s.as_object().cloned().unwrap_or_default()
    }

    fn said(args: Value) -> String {
        explain("read", &schema(), args.as_object(), "failed to deserialize parameters: whatever serde said")
    }

    #[test]
    fn the_argument_at_fault_is_named_with_what_it_takes() {
        assert_eq!(
            said(json!({"session": "t1", "from_line": -3})),
            "`from_line` takes a whole number ≥ 0, not -3. Nothing was done (tools/list gives each argument's type and meaning)"
        );
        assert!(
            said(json!({"session": "t1", "view": "full"}))
                .starts_with("`view` takes one of \"cooked\", \"screen\", \"raw\", not \"full\".")
        );
        assert!(
            said(json!({"session": "t1", "keys": "enter"}))
                .starts_with("`keys` takes a list, each item a string, not \"enter\".")
        );
        assert!(said(json!({"session": "t1", "keys": [1]})).starts_with("`keys` takes a list"));
        assert!(said(json!({"session": "t1", "wait": "2"})).starts_with("`wait` takes a number, not \"2\"."));
        assert!(said(json!({"session": "t1", "take_over": "yes"})).starts_with("`take_over` takes true or false"));
        assert!(said(json!({"session": 7})).starts_with("`session` takes a string, not 7."));
    }

    #[test]
    fn unknown_and_missing_arguments_are_named() {
        assert!(said(json!({"session": "t1", "rows": 5})).starts_with(
            "`rows` is not an argument of read; it takes from_line, keys, session, take_over, view, wait."
        ));
        assert!(said(json!({"view": "raw"})).starts_with("read needs `session` (a string)."));
        assert!(
            said(json!({"session": "t1", "take": true}))
                .starts_with("`take` is not an argument of read (`take_over`?);")
        );
        assert!(
            said(json!({"session": "t1", "veiw": "raw"})).starts_with("`veiw` is not an argument of read (`view`?);")
        );
        assert!(said(json!({"session": "t1", "zz": 1})).starts_with("`zz` is not an argument of read; it takes"));
    }

    #[test]
    fn what_the_schema_does_not_explain_keeps_serdes_words() {
        let told = said(json!({"session": "t1", "from_line": 3, "wait": null}));
        assert_eq!(told, "read's arguments do not fit it: whatever serde said. Nothing was done");
        let long = said(json!({"session": ["a".repeat(100)]}));
        assert!(long.contains('…') && long.len() < 200, "{long}");
    }
}
