//! Every text table the commands print, through one formatter (comfy-table): columns two
//! spaces apart, no borders, no wrapping, each cell shown for a terminal (a cell read from a
//! run folder cannot move the cursor or start a line), no trailing spaces.

use comfy_table::{CellAlignment, ContentArrangement, Table};

/// A header and rows; the columns in `right` aligned right (numbers).
pub fn render(header: &[String], rows: &[Vec<String>], right: &[usize]) -> String {
    let shown = |cells: &[String]| -> Vec<String> {
        cells
            .iter()
            .map(|c| crate::core::text::for_terminal(c))
            .collect()
    };
    let mut table = Table::new();
    table
        .load_style(comfy_table::presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(shown(header));
    for r in rows {
        table.add_row(shown(r));
    }
    let columns = table.column_count();
    for (i, column) in table.column_iter_mut().enumerate() {
        column.set_padding((0, if i + 1 == columns { 0 } else { 2 }));
        if right.contains(&i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out = String::new();
    for line in table.lines() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn columns_two_spaces_apart_numbers_right_and_cells_shown_safely() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let out = render(
            &s(&["task", "n", "note"]),
            &[s(&["a", "10", "x"]), s(&["bbbb", "7", "evil\x1b[2J\nline"])],
            &[1],
        );
        assert_eq!(
            out.lines().next(),
            Some("task   n  note"),
            "header, left and right:\n{out}"
        );
        assert!(out.contains("a     10  x\n"), "{out}");
        assert!(out.contains("bbbb   7  "), "{out}");
        assert!(!out.contains('\x1b') && out.lines().count() == 3, "{out}");
    }
}
