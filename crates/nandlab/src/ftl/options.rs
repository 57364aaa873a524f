//! FTL options: the `[ftl]` table of a configuration or `--ftl-opt
//! key=value`, parsed by each FTL into its own typed struct, and their
//! documentation for `nandlab ftls`.

use serde::Deserialize;

/// An FTL's options as written in the `[ftl]` table or given with
/// `--ftl-opt key=value`; each FTL parses them into its own typed struct.
pub type FtlOptions = toml::Table;

/// Documentation of one FTL option (for `nandlab ftls`).
#[derive(Copy, Clone, Debug)]
pub struct OptionDoc {
    pub name: &'static str,
    pub default: &'static str,
    pub help: &'static str,
}

/// `a` followed by `b` (an FTL's own options, then a shared part's), in a const context.
pub const fn concat_option_docs<const A: usize, const B: usize, const N: usize>(
    a: [OptionDoc; A],
    b: [OptionDoc; B],
) -> [OptionDoc; N] {
    assert!(A + B == N, "the lengths must add up");
    let mut out = [OptionDoc { name: "", default: "", help: "" }; N];
    let mut i = 0;
    while i < N {
        out[i] = if i < A { a[i] } else { b[i - A] };
        i += 1;
    }
    out
}

/// Split an option table into the options named in `keys` and the rest
/// (an FTL whose options are its own and a shared part's parses each).
pub fn split_options(options: &FtlOptions, keys: &[&str]) -> (FtlOptions, FtlOptions) {
    let (mut named, mut rest) = (FtlOptions::new(), FtlOptions::new());
    for (k, v) in options {
        let part = if keys.contains(&k.as_str()) { &mut named } else { &mut rest };
        part.insert(k.clone(), v.clone());
    }
    (named, rest)
}

/// Parse an FTL's typed options from its option table, naming the bad field.
pub fn parse_options<T: for<'de> Deserialize<'de>>(ftl: &str, options: &FtlOptions) -> Result<T, String> {
    // Round-trip through TOML text so the error carries a span: the line
    // of the offending option, from which its name is read back.
    let text = toml::to_string(options).map_err(|e| format!("ftl `{ftl}` options: {e}"))?;
    toml::from_str::<T>(&text).map_err(|e| {
        let message = e.message().trim();
        if let Some((name, valid)) = unknown_option(message) {
            return format!("ftl `{ftl}`: unknown option `{name}` (valid options: {valid})");
        }
        match e.span().and_then(|s| key_of_line_at(&text, s.start)) {
            Some(k) => format!("ftl `{ftl}` option `{k}`: {message}"),
            None => format!("ftl `{ftl}` options: {message}"),
        }
    })
}

/// serde's "unknown field `x`, expected one of `a`, `b`" as (`x`, "`a`, `b`").
fn unknown_option(message: &str) -> Option<(&str, &str)> {
    let (name, rest) = message.strip_prefix("unknown field `")?.split_once('`')?;
    let rest = rest.trim_start_matches(',').trim();
    let valid = rest.strip_prefix("expected one of ").or_else(|| rest.strip_prefix("expected ")).unwrap_or("none");
    Some((name, valid))
}

/// The key set on the line that holds byte `at` of TOML `text`.
fn key_of_line_at(text: &str, at: usize) -> Option<String> {
    let at = at.min(text.len());
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next()?;
    let key = line.split('=').next()?.trim();
    (!key.is_empty() && !key.starts_with('[')).then(|| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Opts {
        gc_policy: Option<String>,
        copyback: Option<bool>,
    }

    fn parse(text: &str) -> Result<Opts, String> {
        parse_options("page", &toml::from_str::<FtlOptions>(text).unwrap())
    }

    /// `op=5` next to a valid option was blamed on the valid one.
    #[test]
    fn an_unknown_option_is_named_with_the_valid_ones() {
        let e = parse("gc_policy = \"greedy\"\nop = 5").unwrap_err();
        assert!(e.contains("unknown option `op`"), "{e}");
        assert!(e.contains("valid options: `gc_policy` or `copyback`"), "lists the valid options: {e}");
        assert!(!e.contains("option `gc_policy`"), "{e}");
    }

    #[test]
    fn a_bad_value_names_its_own_option() {
        let e = parse("gc_policy = \"greedy\"\ncopyback = 3").unwrap_err();
        assert!(e.starts_with("ftl `page` option `copyback`:"), "{e}");
        let e = parse("copyback = true\ngc_policy = 7").unwrap_err();
        assert!(e.starts_with("ftl `page` option `gc_policy`:"), "{e}");
    }
}
