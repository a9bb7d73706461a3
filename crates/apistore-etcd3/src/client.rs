//! The connection to etcd. No etcd-client type leaks out of this crate: callers give
//! endpoints and options, and get an [`EtcdClient`] to build stores from.

use std::fmt;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};

use crate::error::ConnectError;

/// How to reach etcd.
#[derive(Clone)]
pub struct ClientConfig {
    /// Endpoints, e.g. `http://127.0.0.1:2379`.
    pub endpoints: Vec<String>,
    /// How long to wait for a connection (kube-apiserver: 20 s).
    pub dial_timeout: Duration,
    /// Keep-alive interval and timeout on the connection (kube-apiserver: 30 s and 10 s).
    pub keep_alive: Option<(Duration, Duration)>,
    /// etcd user name and password, when etcd has authentication on.
    pub credentials: Option<(String, String)>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            endpoints: vec!["http://127.0.0.1:2379".to_owned()],
            dial_timeout: Duration::from_secs(20),
            keep_alive: Some((Duration::from_secs(30), Duration::from_secs(10))),
            credentials: None,
        }
    }
}

impl ClientConfig {
    /// A config for the given endpoints, with kube-apiserver's defaults otherwise.
    pub fn new<I, S>(endpoints: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The password never reaches a log.
        f.debug_struct("ClientConfig")
            .field("endpoints", &self.endpoints)
            .field("dial_timeout", &self.dial_timeout)
            .field("keep_alive", &self.keep_alive)
            .field(
                "credentials",
                &self
                    .credentials
                    .as_ref()
                    .map(|(user, _)| (user, "<redacted>")),
            )
            .finish()
    }
}

/// A connection to an etcd cluster, cheap to clone and shared by every store built on it.
#[derive(Clone)]
pub struct EtcdClient {
    pub(crate) inner: Client,
    endpoints: Vec<String>,
}

impl fmt::Debug for EtcdClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdClient")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

impl EtcdClient {
    /// Connects to etcd. Fails within the dial timeout when no endpoint answers.
    pub async fn connect(config: &ClientConfig) -> Result<Self, ConnectError> {
        if config.endpoints.is_empty() {
            return Err(ConnectError::NoEndpoints);
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(config.dial_timeout)
            .with_timeout(config.dial_timeout);
        if let Some((interval, timeout)) = config.keep_alive {
            options = options.with_keep_alive(interval, timeout);
        }
        if let Some((user, password)) = &config.credentials {
            options = options.with_user(user.clone(), password.clone());
        }
        let connect = Client::connect(config.endpoints.clone(), Some(options));
        let inner = match tokio::time::timeout(config.dial_timeout, connect).await {
            Ok(Ok(client)) => client,
            Ok(Err(source)) => {
                return Err(ConnectError::Connect {
                    endpoints: config.endpoints.join(","),
                    source: Box::new(source),
                });
            }
            Err(_) => {
                return Err(ConnectError::DialTimeout {
                    endpoints: config.endpoints.join(","),
                    timeout: config.dial_timeout,
                });
            }
        };
        Ok(Self {
            inner,
            endpoints: config.endpoints.clone(),
        })
    }

    /// The endpoints this client was given.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }
}
