//! Which of Hermes's loaders reads a database, by its `schema_version`.

/// Which loader a database's Hermes runs, from `schema_version`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loader {
    /// Schema 1 (and a database without `schema_version`).
    Early,
    /// Schemas 2–30: Hermes 0.19.0's loader (schema 22).
    V22,
    /// Schema 31 and later.
    V31,
}

impl Loader {
    pub fn of_version(version: Option<i64>) -> Self {
        match version {
            Some(v) if v >= 31 => Loader::V31,
            Some(v) if v >= 2 => Loader::V22,
            _ => Loader::Early,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_by_schema_version() {
        assert_eq!(Loader::of_version(None), Loader::Early);
        assert_eq!(Loader::of_version(Some(1)), Loader::Early);
        assert_eq!(Loader::of_version(Some(22)), Loader::V22);
        assert_eq!(Loader::of_version(Some(31)), Loader::V31);
        assert_eq!(Loader::of_version(Some(40)), Loader::V31);
    }
}
