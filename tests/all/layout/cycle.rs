//! One import cycle of a module graph, if it has any.

use std::collections::{BTreeMap, BTreeSet};

/// A cycle of `graph` (`module → the modules it imports from`) as the
/// modules along it, the first repeated at the end.
pub fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut c = path[i..].to_vec();
            c.push(m.to_owned());
            return Some(c);
        }
        if !done.insert(m.to_owned()) {
            return None;
        }
        path.push(m.to_owned());
        for next in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, graph, done, path) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(m, graph, &mut done, &mut Vec::new()))
}

/// One cycle through each group of modules that import each other (a
/// strongly connected component of `graph`), so a check reports them all.
pub fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(m) = todo.pop() {
            for next in graph.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut grouped = BTreeSet::new();
    let mut found = Vec::new();
    for m in graph.keys() {
        if grouped.contains(m) || !reached[m].contains(m) {
            continue;
        }
        let group: BTreeSet<String> = reached[m]
            .iter()
            .filter(|o| reached.get(o).is_some_and(|r| r.contains(m)))
            .cloned()
            .collect();
        let inside: BTreeMap<String, BTreeSet<String>> = group
            .iter()
            .map(|g| (g.clone(), &graph[g] & &group))
            .collect();
        found.extend(cycle(&inside));
        grouped.extend(group);
    }
    found
}
