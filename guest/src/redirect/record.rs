//! The fields of a record's JSON that the rules look at, read straight
//! from the text: no `serde_json::Value` tree. Building and dropping that
//! tree (a map, a string per key and value) was the largest part of a
//! `resolve` inside the component (`make bench`, docs/src/performance.md), and
//! `resolve` runs on every room message.
//!
//! What is read matches what the `Value` route read: any JSON error is an
//! error; a later duplicate key replaces an earlier one; numbers are
//! serde_json's (u64, i64 or f64, out-of-range refused); other keys are
//! skipped but must be valid JSON.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A whole record value: an object's fields, or the kind of what it is
/// instead (`a string`, `an array`, …).
pub(crate) enum Top {
    Object(Fields),
    Not(&'static str),
}

/// The three fields the rules use; `None` when absent.
#[derive(Default)]
pub(crate) struct Fields {
    pub session_id: Option<Field>,
    pub timestamp: Option<Field>,
    pub agent: Option<Field>,
}

/// One field's value: a string, a number, or only its kind.
pub(crate) enum Field {
    Str(String),
    Num(serde_json::Number),
    Other(&'static str),
}

impl Field {
    /// How a person reads the field's JSON type, e.g. `a string`.
    pub fn kind(&self) -> &'static str {
        match self {
            Field::Str(_) => "a string",
            Field::Num(_) => "a number",
            Field::Other(kind) => kind,
        }
    }
}

/// Parse `value`; `Err` for anything that is not JSON.
pub(crate) fn parse(value: &str) -> Result<Top, serde_json::Error> {
    serde_json::from_str(value)
}

enum Key {
    SessionId,
    Timestamp,
    Agent,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "session_id" => Key::SessionId,
                    "timestamp" => Key::Timestamp,
                    "agent" => Key::Agent,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// Visits any JSON value: `T::from_*` says what each kind becomes.
struct AnyVisitor<T>(std::marker::PhantomData<T>);

trait FromJson: Sized {
    fn string(s: &str) -> Self;
    fn number(n: serde_json::Number) -> Self;
    fn kind(kind: &'static str) -> Self;
    fn object<'de, A: MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
}

impl<'de, T: FromJson> Visitor<'de> for AnyVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<T, E> {
        Ok(T::kind("a boolean"))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<T, E> {
        Ok(T::number(n.into()))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<T, E> {
        Ok(T::number(n.into()))
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<T, E> {
        // serde_json hands out finite floats only.
        Ok(serde_json::Number::from_f64(n).map_or_else(|| T::kind("a number"), T::number))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
        Ok(T::string(s))
    }
    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Ok(T::kind("null"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(T::kind("an array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::object(map)
    }
}

impl FromJson for Field {
    fn string(s: &str) -> Self {
        Field::Str(s.to_owned())
    }
    fn number(n: serde_json::Number) -> Self {
        Field::Num(n)
    }
    fn kind(kind: &'static str) -> Self {
        Field::Other(kind)
    }
    fn object<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Field::Other("an object"))
    }
}

impl FromJson for Top {
    fn string(_: &str) -> Self {
        Top::Not("a string")
    }
    fn number(_: serde_json::Number) -> Self {
        Top::Not("a number")
    }
    fn kind(kind: &'static str) -> Self {
        Top::Not(kind)
    }
    fn object<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut fields = Fields::default();
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::SessionId => fields.session_id = Some(map.next_value()?),
                Key::Timestamp => fields.timestamp = Some(map.next_value()?),
                Key::Agent => fields.agent = Some(map.next_value()?),
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Top::Object(fields))
    }
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AnyVisitor(std::marker::PhantomData))
    }
}

impl<'de> Deserialize<'de> for Top {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AnyVisitor(std::marker::PhantomData))
    }
}
