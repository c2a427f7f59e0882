//! Object storage (S3, GCS, Azure, a local folder) through object_store. Credentials
//! and endpoints come from the environment, as each cloud's tools read them
//! (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, `GOOGLE_SERVICE_ACCOUNT`,
//! `AZURE_STORAGE_ACCOUNT_NAME`…).

use std::sync::Arc;

use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt as _};

use crate::{Error, Result};

/// The store a URL names and the prefix inside it.
#[derive(Debug, Clone)]
pub struct Store {
    pub store: Arc<dyn ObjectStore>,
    pub prefix: ObjPath,
    pub url: url::Url,
}

fn remote(url: &url::Url, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
    crate::remote(url.to_string(), e)
}

impl Store {
    pub fn open(url: &url::Url) -> Result<Store> {
        crate::http::install_crypto();
        let store: Arc<dyn ObjectStore> = match url.scheme() {
            "s3" => Arc::new(
                object_store::aws::AmazonS3Builder::from_env()
                    .with_url(url.as_str())
                    .build()
                    .map_err(|e| remote(url, e))?,
            ),
            "gs" => Arc::new(
                object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(url.as_str())
                    .build()
                    .map_err(|e| remote(url, e))?,
            ),
            "az" | "abfs" => Arc::new(
                object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_url(url.as_str())
                    .build()
                    .map_err(|e| remote(url, e))?,
            ),
            "file" => {
                let dir = url.to_file_path().map_err(|()| Error::Usage(format!("{url} is not a local path")))?;
                std::fs::create_dir_all(&dir).map_err(crate::io(&dir))?;
                let fs = object_store::local::LocalFileSystem::new_with_prefix(&dir).map_err(|e| remote(url, e))?;
                return Ok(Store { store: Arc::new(fs), prefix: ObjPath::default(), url: url.clone() });
            }
            other => return Err(Error::Usage(format!("{url}: unknown object store scheme {other:?}"))),
        };
        let prefix = ObjPath::from(url.path().trim_matches('/'));
        Ok(Store { store, prefix, url: url.clone() })
    }

    /// `prefix/part/part…`
    pub fn path(&self, parts: &[&str]) -> ObjPath {
        let mut p = self.prefix.clone();
        for part in parts {
            p = p.join(*part);
        }
        p
    }

    pub async fn get_small(&self, path: &ObjPath, max: u64) -> Result<Option<Vec<u8>>> {
        match self.store.get(path).await {
            Ok(r) => {
                if r.meta.size > max {
                    return Err(Error::Remote(format!(
                        "{}/{path} is {} bytes, more than {max}",
                        self.url, r.meta.size
                    )));
                }
                let b = r.bytes().await.map_err(|e| remote(&self.url, e))?;
                Ok(Some(b.to_vec()))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(remote(&self.url, e)),
        }
    }

    pub async fn put(&self, path: &ObjPath, bytes: Vec<u8>) -> Result<()> {
        self.store.put(path, bytes.into()).await.map_err(|e| remote(&self.url, e))?;
        Ok(())
    }

    /// Uploads a file in parts (large archives never sit whole in memory).
    pub async fn put_file(&self, path: &ObjPath, file: &std::path::Path) -> Result<()> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut f = tokio::fs::File::open(file).await.map_err(crate::io(file))?;
        let mut w = object_store::buffered::BufWriter::new(self.store.clone(), path.clone());
        let mut buf = vec![0u8; 8 << 20];
        loop {
            let n = f.read(&mut buf).await.map_err(crate::io(file))?;
            if n == 0 {
                break;
            }
            w.write_all(&buf[..n]).await.map_err(|e| remote(&self.url, e))?;
        }
        w.shutdown().await.map_err(|e| remote(&self.url, e))?;
        Ok(())
    }
}
