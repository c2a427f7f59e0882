//! `atlas models`: the pinned model and runtime files and where each goes.

use atlas_runtime::model::{Provision, atlas_home, provisions};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Print stable JSON instead of text.
    #[arg(long)]
    json: bool,
}

impl Args {
    pub(super) fn run(self) -> anyhow::Result<()> {
        let rows: Vec<(Provision, &str)> = provisions()
            .into_iter()
            .map(|p| {
                let state = p.state();
                (p, state)
            })
            .collect();
        let text = if self.json {
            let mut list = Vec::with_capacity(rows.len());
            for (p, state) in &rows {
                let mut v = serde_json::to_value(p)?;
                v["state"] = (*state).into();
                list.push(v);
            }
            format!("{}\n", serde_json::to_string_pretty(&list)?)
        } else {
            let mut s = format!("ATLAS_HOME {}\n", atlas_home().display());
            for (p, state) in &rows {
                s.push_str(&format!("{:<9} {:<24} {:<16} {}\n", state, p.owner, p.file, p.reads.display()));
            }
            s
        };
        super::print(&text)
    }
}
