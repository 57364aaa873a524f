//! `KEY=VALUE` assignments, as command-line options give them: an FTL
//! option (`--ftl-opt gc_stream=shared`), a `[timing]` or `[host]` field
//! (`--timing erase_suspend=true`), a rule's severity
//! (`--rule program_out_of_order=warn`), a power-cut effect
//! (`--power-cut paired_pages=on`).
//!
//! One splitting rule for all of them (at the first `=`, so a value may
//! hold `=`), and one reading of values where the target is a TOML table:
//! the value is read as TOML (a number, a boolean, an array, a quoted
//! string) and otherwise taken as a bare string, so `gc_policy=greedy`
//! needs no quotes while `gc_foreground_free_blocks=3` is a number.
//! Setting fields of a typed table goes through the table's own serde
//! form and reads it back after each assignment, so an unknown key or a
//! wrong type is refused by the type itself, naming the assignment at fault.

/// Split `text` at its first `=` into (key, value), neither trimmed; the
/// error shows `text` and the expected `form` (`KEY=VALUE`,
/// `RULE=SEVERITY, e.g. …`).
pub fn split<'a>(text: &'a str, form: &str) -> Result<(&'a str, &'a str), String> {
    text.split_once('=').ok_or_else(|| format!("`{text}`: expected {form}"))
}

/// A value as written after `=`: TOML if it parses as a TOML value, else
/// the trimmed text as a string.
pub fn toml_value(text: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {text}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(text.trim().to_string()))
}

/// `KEY=VALUE` with the key trimmed and the value read by [`toml_value`].
pub fn parse_toml(text: &str) -> Result<(String, toml::Value), String> {
    let (key, value) = split(text, "KEY=VALUE")?;
    Ok((key.trim().to_string(), toml_value(value)))
}

/// `current` with each `KEY=VALUE` of `assignments` set in its serde form
/// and read back as a `T`; errors start with `--{option}`. Without
/// assignments, `current` read back through the same form.
pub fn override_fields<T>(option: &str, current: &T, assignments: &[String]) -> Result<T, String>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    if assignments.is_empty() {
        return toml::Value::try_from(current)
            .map_err(|e| e.to_string())?
            .try_into()
            .map_err(|e: toml::de::Error| e.to_string());
    }
    let mut table = match toml::Value::try_from(current).map_err(|e| e.to_string())? {
        toml::Value::Table(t) => t,
        _ => unreachable!("tables serialise as tables"),
    };
    for a in assignments {
        let (key, value) = parse_toml(a).map_err(|e| format!("--{option} {e}"))?;
        table.insert(key, value);
        // Read after each assignment, so an error names the one at fault.
        toml::Value::Table(table.clone())
            .try_into::<T>()
            .map_err(|e: toml::de::Error| format!("--{option} {}: {}", a.trim(), e.message().trim()))?;
    }
    toml::Value::Table(table).try_into().map_err(|e: toml::de::Error| format!("--{option}: {}", e.message().trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_typed_and_bare_words_are_strings() {
        assert_eq!(parse_toml("copyback=false").unwrap().1, toml::Value::Boolean(false));
        assert_eq!(parse_toml("gc_foreground_free_blocks=3").unwrap().1, toml::Value::Integer(3));
        assert_eq!(
            parse_toml(" gc_stream = shared").unwrap(),
            ("gc_stream".into(), toml::Value::String("shared".into()))
        );
        assert_eq!(parse_toml("k=a=b").unwrap().1, toml::Value::String("a=b".into()));
        assert_eq!(parse_toml("nothing").unwrap_err(), "`nothing`: expected KEY=VALUE");
        assert_eq!(split("x", "RULE=SEVERITY").unwrap_err(), "`x`: expected RULE=SEVERITY");
    }

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Table {
        depth: u32,
        name: String,
    }

    #[test]
    fn fields_are_set_through_the_type_and_errors_name_the_assignment() {
        let t = Table { depth: 1, name: "a".into() };
        let set = |a: &[&str]| override_fields("host", &t, &a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(set(&["depth=8", "name=b"]).unwrap(), Table { depth: 8, name: "b".into() });
        assert_eq!(set(&[]).unwrap(), t);
        assert!(set(&["depth=deep"]).unwrap_err().starts_with("--host depth=deep: "));
        assert!(set(&["warp=1"]).unwrap_err().contains("warp"));
        assert_eq!(set(&["depth"]).unwrap_err(), "--host `depth`: expected KEY=VALUE");
    }
}
