//! A plain text table with aligned columns, for bench reports.

use std::fmt;

/// Rows of cells under a header; numbers right-aligned, text left-aligned.
#[derive(Clone, Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let row: Vec<String> = cells.into_iter().map(Into::into).collect();
        assert_eq!(
            row.len(),
            self.header.len(),
            "a row needs one cell per column"
        );
        self.rows.push(row);
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table in Markdown (GitHub's tables), numbers right-aligned.
    pub fn markdown(&self) -> String {
        let esc = |c: &str| c.replace('|', "\\|");
        let mut out = format!(
            "| {} |\n|",
            self.header
                .iter()
                .map(|h| esc(h))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        for i in 0..self.header.len() {
            let right = self.rows.iter().any(|r| numeric(&r[i]));
            out.push_str(if right { "--:|" } else { "---|" });
        }
        out.push('\n');
        for row in &self.rows {
            out.push_str(&format!(
                "| {} |\n",
                row.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
            ));
        }
        out
    }
}

fn numeric(cell: &str) -> bool {
    !cell.is_empty()
        && cell
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | ',' | 'x' | '-'))
        && cell.chars().any(|c| c.is_ascii_digit())
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut widths: Vec<usize> = self.header.iter().map(String::len).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.len());
            }
        }
        let line = |f: &mut fmt::Formatter<'_>, cells: &[String], header: bool| -> fmt::Result {
            let mut out = String::new();
            for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
                if i > 0 {
                    out.push_str("  ");
                }
                if !header && numeric(cell) {
                    out.push_str(&format!("{cell:>w$}"));
                } else {
                    out.push_str(&format!("{cell:<w$}"));
                }
            }
            writeln!(f, "{}", out.trim_end())
        };
        line(f, &self.header, true)?;
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line(f, &rule, true)?;
        for row in &self.rows {
            line(f, row, false)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_text_left_and_numbers_right() {
        let mut t = Table::new(["name", "iops"]);
        t.row(["wal0", "12"]);
        t.row(["data0", "12345"]);
        assert_eq!(
            t.to_string(),
            "name   iops\n-----  -----\nwal0      12\ndata0  12345\n"
        );
        assert_eq!(
            t.markdown(),
            "| name | iops |\n|---|--:|\n| wal0 | 12 |\n| data0 | 12345 |\n"
        );
    }
}
