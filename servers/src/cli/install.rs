//! `atlas install`: a published bundle, checked, unpacked safely, verified, switched to.

use atlas_dist::config::Config;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// github:OWNER/REPO[@TAG], s3://…, gs://…, az://…, file://… (a publish target),
    /// https://…/x.tar.zst, or a local .tar.zst.
    source: String,
    /// Require a valid minisign signature by this public key (RW… or a .pub file); repeatable.
    #[arg(long)]
    trust: Vec<String>,
    /// Versions to keep per bundle (default 5, or the config file's install.keep).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1000))]
    keep: Option<u16>,
    /// The archive's sha256, when no .sha256 sits beside a local file or URL.
    #[arg(long, value_parser = super::parse_sha256)]
    sha256: Option<String>,
    /// Install it even when it is older than the installed version of that bundle.
    #[arg(long)]
    allow_downgrade: bool,
    /// Print what was installed as JSON instead of the editor config.
    #[arg(long)]
    json: bool,
}

impl Args {
    pub(super) fn run(self, cfg: &Config) -> anyhow::Result<()> {
        let opts = atlas_dist::install::Options {
            allow_downgrade: self.allow_downgrade,
            ..crate::manage::options(cfg, &self.trust, self.keep.map(usize::from), self.sha256)
        };
        crate::manage::install(&self.source, &opts, self.json)
    }
}
