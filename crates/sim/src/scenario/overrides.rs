//! `imp sim --set KEY=VALUE`: changing a scenario's keys before it is parsed, so an
//! experiment can vary one setting without a copy of the file.
//!
//! KEY is a path of dotted parts from the top of the file: `seed`, `duration`,
//! `link.0.loss` (the first `[[link]]`), `link[modem-9600-vm].loss` (the `[[link]]`
//! whose `name` is `modem-9600-vm`), `host[vm-like].tcp.min_rto`,
//! `link[oc12-sack].burst_loss.good_to_bad`. Every part but the last must exist; the
//! last may be new (the scenario's own check then rejects a key it does not know).
//!
//! VALUE is a TOML value (`5`, `0.01`, `true`, `"20s"`, `{ sack = false }`); anything
//! that is not one is taken as a string, so `loss=1%` and `rate=10mbit` need no
//! quotes.
//!
//! Each override is applied and the result parsed in turn; the first that makes the
//! scenario invalid is the error, naming its KEY.

use toml::{Table, Value};

use super::{Scenario, ScenarioError};

/// One `KEY=VALUE` of `--set`.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    /// The dotted path, as given.
    pub key: String,
    /// The value, as given.
    pub value: String,
}

impl std::str::FromStr for Override {
    type Err = String;

    /// Splits `KEY=VALUE` at the first `=`; both must be non-empty.
    fn from_str(arg: &str) -> Result<Override, String> {
        let Some((key, value)) = arg.split_once('=') else {
            return Err(format!(
                "{arg:?}: give KEY=VALUE, e.g. link.0.loss=1% or seed=7"
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() || value.is_empty() {
            return Err(format!("{arg:?}: give KEY=VALUE with both non-empty"));
        }
        Ok(Override {
            key: key.to_string(),
            value: value.to_string(),
        })
    }
}

/// One part of a key: a table key, optionally selecting an element of the array it
/// names by index or by `name`.
enum Part<'a> {
    Key(&'a str),
    Index(usize),
    Named(&'a str),
}

/// Splits `link[a.b].loss` into `link`, `[a.b]`, `loss` (dots inside brackets stay).
fn parts(key: &str) -> Result<Vec<Part<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = key;
    while !rest.is_empty() {
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        let word = &rest[..end];
        rest = &rest[end..];
        if !word.is_empty() {
            out.push(match word.parse::<usize>() {
                Ok(i) => Part::Index(i),
                Err(_) => Part::Key(word),
            });
        } else if !rest.starts_with('[') {
            return Err("an empty part (two dots, or a dot at an end)".into());
        }
        if let Some(inner) = rest.strip_prefix('[') {
            let close = inner.find(']').ok_or("a `[` without its `]`")?;
            let name = inner[..close].trim();
            if name.is_empty() {
                return Err("empty brackets: give an index or a name".into());
            }
            out.push(match name.parse::<usize>() {
                Ok(i) => Part::Index(i),
                Err(_) => Part::Named(name),
            });
            rest = &inner[close + 1..];
        }
        if let Some(after) = rest.strip_prefix('.') {
            if after.is_empty() {
                return Err("an empty part (a dot at the end)".into());
            }
            rest = after;
        } else if !rest.is_empty() && !rest.starts_with('[') {
            return Err(format!("unexpected {rest:?}"));
        }
    }
    if out.is_empty() {
        return Err("an empty key".into());
    }
    Ok(out)
}

/// The TOML value `text` denotes, or `text` as a string.
fn value_of(text: &str) -> Value {
    match format!("v = {text}").parse::<Table>() {
        Ok(mut t) => t.remove("v").unwrap_or_else(|| Value::String(text.into())),
        Err(_) => Value::String(text.to_string()),
    }
}

/// The element of `array` a part selects; `path` is the key so far, for errors.
fn select<'a>(
    array: &'a mut [Value],
    part: &Part<'_>,
    path: &str,
) -> Result<&'a mut Value, String> {
    let len = array.len();
    match part {
        Part::Index(i) => array.get_mut(*i).ok_or_else(|| {
            format!(
                "`{path}` has {len} entries (0 to {})",
                len.saturating_sub(1)
            )
        }),
        Part::Named(name) => array
            .iter_mut()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(name))
            .ok_or_else(|| format!("no entry of `{path}` is named {name:?}")),
        Part::Key(k) => Err(format!(
            "`{path}` is a list: give `{path}.N` or `{path}[NAME]`, not `.{k}`"
        )),
    }
}

/// Sets `key` to `value` in `table`; on an error `table` is unchanged.
fn set(table: &mut Table, key: &str, value: Value) -> Result<(), String> {
    let parts = parts(key)?;
    let Some((last, walk)) = parts.split_last() else {
        return Err("an empty key".into());
    };
    let mut root = Value::Table(table.clone());
    let mut here = &mut root;
    let mut path = String::new();
    for part in walk {
        here = step(here, part, &path)?;
        match part {
            Part::Key(k) if path.is_empty() => path.push_str(k),
            Part::Key(k) => path = format!("{path}.{k}"),
            Part::Index(n) => path = format!("{path}.{n}"),
            Part::Named(n) => path = format!("{path}[{n}]"),
        }
    }
    match (here, last) {
        (Value::Table(t), Part::Key(k)) => {
            t.insert((*k).to_string(), value);
        }
        (Value::Array(items), part) => *select(items, part, &path)? = value,
        (Value::Table(_), _) => return Err(format!("`{path}` is a table: give `{path}.KEY`")),
        _ => return Err(format!("`{path}` is not a table or a list")),
    }
    if let Value::Table(t) = root {
        *table = t;
    }
    Ok(())
}

/// The value one part of a key leads to from `here` (`path` is the key so far).
fn step<'a>(here: &'a mut Value, part: &Part<'_>, path: &str) -> Result<&'a mut Value, String> {
    let at = if path.is_empty() {
        "the scenario".to_string()
    } else {
        format!("`{path}`")
    };
    match (here, part) {
        (Value::Array(items), part) => select(items, part, path),
        (Value::Table(t), Part::Key(k)) => {
            let known = t.keys().cloned().collect::<Vec<_>>().join(", ");
            t.get_mut(*k)
                .ok_or_else(|| format!("{at} has no `{k}` (it has: {known})"))
        }
        (Value::Table(_), _) => Err(format!("{at} is a table: give a key, not an index")),
        _ => Err(format!("{at} is not a table or a list")),
    }
}

impl Scenario {
    /// Parses `text` (as [`Scenario::parse`]), then applies `overrides` one by one,
    /// parsing after each; an override that names nothing in the file or makes the
    /// scenario invalid is an error naming its key.
    pub fn parse_with(
        text: &str,
        origin: &str,
        overrides: &[Override],
    ) -> Result<Scenario, ScenarioError> {
        let mut scenario = Scenario::parse(text, origin)?;
        if overrides.is_empty() {
            return Ok(scenario);
        }
        let mut table: Table = text.parse().map_err(|e: toml::de::Error| ScenarioError {
            origin: origin.to_string(),
            line: None,
            field: None,
            message: e.message().to_string(),
        })?;
        for o in overrides {
            let fail = |message: String| ScenarioError {
                origin: format!("--set {}={}", o.key, o.value),
                line: None,
                field: None,
                message,
            };
            set(&mut table, &o.key, value_of(&o.value)).map_err(fail)?;
            let text = toml::to_string(&table).map_err(|e| fail(e.to_string()))?;
            scenario = Scenario::parse(&text, origin).map_err(|e| {
                let field = e
                    .field
                    .map(|f| format!("field `{f}`: "))
                    .unwrap_or_default();
                fail(format!("{field}{}", e.message))
            })?;
        }
        Ok(scenario)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_text(text: &str, key: &str, value: &str) -> Result<Table, String> {
        let mut table: Table = text.parse().unwrap();
        set(&mut table, key, value_of(value)).map(|()| table)
    }

    const TEXT: &str = "seed = 1\n[[link]]\nname = \"a.b\"\nloss = \"1%\"\nburst = { x = 1 }\n[[link]]\nname = \"c\"\n";

    #[test]
    fn keys_reach_top_level_indexed_named_and_nested_values() {
        let t = set_text(TEXT, "seed", "7").unwrap();
        assert_eq!(t["seed"].as_integer(), Some(7));
        let t = set_text(TEXT, "link.1.loss", "2%").unwrap();
        assert_eq!(t["link"][1]["loss"].as_str(), Some("2%"));
        let t = set_text(TEXT, "link[a.b].burst.x", "0.5").unwrap();
        assert_eq!(t["link"][0]["burst"]["x"].as_float(), Some(0.5));
        let t = set_text(TEXT, "link[1].name", "d").unwrap();
        assert_eq!(t["link"][1]["name"].as_str(), Some("d"));
    }

    #[test]
    fn bad_keys_say_what_is_missing() {
        let cases = [
            ("lnk.0.loss", "has no `lnk`"),
            ("link.5.loss", "`link` has 2 entries"),
            ("link[zz].loss", "named \"zz\""),
            ("link.loss", "is a list"),
            ("seed.x", "`seed` is not a table"),
            ("link..loss", "empty part"),
            ("link[0", "without its `]`"),
            ("", "empty key"),
        ];
        for (key, needle) in cases {
            let e = set_text(TEXT, key, "1").unwrap_err();
            assert!(e.contains(needle), "{key}: {e}");
        }
        assert!("novalue".parse::<Override>().is_err());
        assert!("k=".parse::<Override>().is_err());
        assert_eq!(
            "a.b=c=d".parse::<Override>().unwrap(),
            Override {
                key: "a.b".into(),
                value: "c=d".into()
            }
        );
    }
}
