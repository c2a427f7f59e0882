//! Numbers an agent sends as text (`"top_k": "3"`, as the Inspector sends what is
//! typed into its form) are taken where the text is a plain number; anything else is
//! the usual invalid-params error, naming the field's expectation. The schemas still
//! say `integer` or `number`.

use serde::de::Error as _;
use serde::{Deserialize as _, Deserializer};

/// An optional whole number, or its decimal text.
pub fn opt_usize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Number(n)) => n
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("expected a whole number of 0 or more, got {n}"))),
        Some(serde_json::Value::String(s)) => s
            .trim()
            .parse::<usize>()
            .map(Some)
            .map_err(|_| D::Error::custom(format!("expected a whole number of 0 or more, got {:?}", short(&s)))),
        Some(other) => Err(D::Error::custom(format!("expected a whole number, got {}", kind(&other)))),
    }
}

/// An optional finite number, or its decimal text.
pub fn opt_f32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f32>, D::Error> {
    let n = match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(serde_json::Value::Number(n)) => n.as_f64(),
        Some(serde_json::Value::String(s)) => s.trim().parse::<f64>().ok(),
        Some(other) => return Err(D::Error::custom(format!("expected a number, got {}", kind(&other)))),
    };
    match n {
        Some(n) if n.is_finite() => Ok(Some(n as f32)),
        _ => Err(D::Error::custom("expected a finite number")),
    }
}

fn short(s: &str) -> String {
    atlas_runtime::utf8::clip_chars(s, 40)
}

fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
        _ => "something else",
    }
}

#[cfg(test)]
mod tests {
    #[derive(Debug, serde::Deserialize)]
    struct A {
        #[serde(default, deserialize_with = "super::opt_usize")]
        n: Option<usize>,
        #[serde(default, deserialize_with = "super::opt_f32")]
        f: Option<f32>,
    }

    #[test]
    fn numbers_as_text_are_taken_and_anything_else_is_refused() {
        let a = |j: &str| serde_json::from_str::<A>(j);
        assert_eq!(a(r#"{"n": 3, "f": 0.5}"#).unwrap().n, Some(3));
        assert_eq!(a(r#"{"n": " 3 ", "f": "0.5"}"#).unwrap().f, Some(0.5));
        assert_eq!(a("{}").unwrap().n, None);
        assert_eq!(a(r#"{"n": null}"#).unwrap().n, None);
        for bad in [r#"{"n": "three"}"#, r#"{"n": -1}"#, r#"{"n": 2.5}"#, r#"{"n": true}"#, r#"{"f": "NaN"}"#] {
            assert!(a(bad).is_err(), "{bad}");
        }
    }
}
