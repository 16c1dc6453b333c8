//! A parent operation's run budget (`Record.budget`): on its record's page the caps and what its
//! children used of them, and a small marker in the record tables.

use maud::{html, Markup};
use oncekey_api::v1;
use std::collections::BTreeMap;

/// `used / cap`, or `used` and that nothing caps it.
fn use_of(used: u32, cap: Option<u32>, uncapped: &str) -> Markup {
    html! {
        @match cap {
            Some(cap) => {
                (used) " / " (cap)
                @if used >= cap { " " span.status.s-FAILED { "spent" } }
            }
            None => { (used) " " span.muted { "(" (uncapped) ")" } }
        }
    }
}

/// Every child namespace the budget caps or a child was created in: (used, cap).
fn per_namespace(u: &v1::BudgetUsage) -> BTreeMap<&str, (u32, Option<u32>)> {
    let mut rows: BTreeMap<&str, (u32, Option<u32>)> = BTreeMap::new();
    if let Some(b) = &u.budget {
        for (ns, cap) in &b.max_per_namespace {
            rows.entry(ns).or_default().1 = Some(*cap);
        }
    }
    for (ns, used) in &u.children_per_namespace {
        rows.entry(ns).or_default().0 = *used;
    }
    rows
}

/// The total cap, if any (0 = none).
fn total_cap(u: &v1::BudgetUsage) -> Option<u32> {
    u.budget
        .as_ref()
        .map(|b| b.max_children)
        .filter(|max| *max > 0)
}

/// The *Run budget* block of a parent's page.
pub(crate) fn block(u: &v1::BudgetUsage) -> Markup {
    let rows = per_namespace(u);
    html! {
        section #budget aria-labelledby="budget-title" {
            h2 #budget-title { "Run budget" }
            p.help { "Set by this operation's first Claim. A child counts when a Claim naming this operation as its parent creates its record; retries of a child do not. Claims of new children past a cap are refused (BUDGET_EXHAUSTED)." }
            dl.fields {
                dt { "Children" }
                dd #budget-children { (use_of(u.children, total_cap(u), "no total cap")) }
                dt { "Refused" }
                dd #budget-refused { (u.refused) " new " @if u.refused == 1 { "child" } @else { "children" } }
            }
            @if !rows.is_empty() {
                table.budget {
                    thead { tr { th scope="col" { "Child namespace" } th scope="col" { "Children / cap" } } }
                    tbody {
                        @for (ns, (used, cap)) in &rows {
                            tr { th scope="row" { (ns) } td { (use_of(*used, *cap, "no cap")) } }
                        }
                    }
                }
            }
        }
    }
}

/// The marker in a table of records: `budget 2/5` (or `budget 2`), the whole use in its title.
pub(crate) fn marker(u: &v1::BudgetUsage) -> Markup {
    let (short, title) = match total_cap(u) {
        Some(cap) => (
            format!("{}/{cap}", u.children),
            format!("Run budget: {} of at most {cap} children", u.children),
        ),
        None => (
            u.children.to_string(),
            format!("Run budget: {} children, no total cap", u.children),
        ),
    };
    let title = match u.refused {
        0 => title,
        n => format!("{title}; {n} refused"),
    };
    html! { span.budget title=(title) { "budget " (short) } }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(max_children: u32) -> v1::BudgetUsage {
        v1::BudgetUsage {
            budget: Some(v1::RunBudget {
                max_children,
                max_per_namespace: [("mail.<send>".to_owned(), 1)].into(),
            }),
            children: 2,
            children_per_namespace: [("mail.<send>".to_owned(), 1), ("pay.x".to_owned(), 1)].into(),
            refused: 1,
        }
    }

    #[test]
    fn the_block_shows_caps_use_and_refusals() {
        let html = block(&usage(5)).into_string();
        assert!(
            html.contains(r#"<dd id="budget-children">2 / 5</dd>"#),
            "{html}"
        );
        assert!(
            html.contains(r#"<dd id="budget-refused">1 new child</dd>"#),
            "{html}"
        );
        assert!(html.contains("<th scope=\"row\">mail.&lt;send&gt;</th><td>1 / 1 <span class=\"status s-FAILED\">spent</span></td>"), "{html}");
        assert!(
            html.contains(
                "<th scope=\"row\">pay.x</th><td>1 <span class=\"muted\">(no cap)</span></td>"
            ),
            "{html}"
        );
        let html = block(&usage(0)).into_string();
        assert!(
            html.contains("2 <span class=\"muted\">(no total cap)</span>"),
            "{html}"
        );
    }

    #[test]
    fn the_marker_is_short() {
        let html = marker(&usage(5)).into_string();
        assert!(
            html.contains(">budget 2/5<") && html.contains("1 refused"),
            "{html}"
        );
        assert!(marker(&usage(0)).into_string().contains(">budget 2<"));
    }
}
