//! `atlas gc`: reclaim the disk package builds hold that no installed version and no
//! project's library set needs (`crate::deps::gc`).

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Print what was freed as JSON.
    #[arg(long)]
    json: bool,
}

impl Args {
    pub(super) fn run(self) -> anyhow::Result<()> {
        let home = atlas_dist::home::Home::from_env();
        let done = crate::deps::gc::collect(&home);
        let (before, after): (u64, u64) = done.iter().fold((0, 0), |(b, a), p| (b + p.before, a + p.after));
        if self.json {
            let v = serde_json::json!({ "packages": done, "before_bytes": before, "after_bytes": after });
            return super::print(&format!("{}\n", serde_json::to_string_pretty(&v)?));
        }
        let human = crate::manage::human_bytes;
        let mut s = String::new();
        for p in &done {
            let what = match (&p.skipped, p.removed) {
                (Some(why), _) => format!("left as it was: {why}"),
                (None, true) => {
                    "removed: no version of it needs its build (none is named by a project, current, or waiting for its vectors)".to_owned()
                }
                (None, false) if p.versions_removed.is_empty() => "kept its installed versions' builds".to_owned(),
                (None, false) => format!("removed the builds of {}", p.versions_removed.join(", ")),
            };
            s.push_str(&format!("{}: {} → {} ({what})\n", p.library, human(p.before), human(p.after)));
        }
        s.push_str(&format!(
            "package builds: {} → {}, freed {} from {}\n",
            human(before),
            human(after),
            human(before.saturating_sub(after)),
            atlas_runtime::words::count(done.len(), "package")
        ));
        super::print(&s)?;
        match done.iter().filter(|p| p.skipped.is_some()).count() {
            0 => Ok(()),
            n => anyhow::bail!(
                "{} left as {} (each said why above)",
                atlas_runtime::words::count(n, "package"),
                atlas_runtime::words::agree(n, "it was", "they were")
            ),
        }
    }
}
