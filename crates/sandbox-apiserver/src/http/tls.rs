//! A throwaway CA and a server certificate for 127.0.0.1 and localhost, generated per
//! instance, served with ALPN `h2` and `http/1.1`.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

pub struct Tls {
    /// The CA certificate (PEM) clients must trust.
    pub ca_pem: String,
    pub ca_der: Vec<u8>,
    pub config: Arc<rustls::ServerConfig>,
}

/// `http1_only`: offer only `http/1.1` by ALPN (clients then never use HTTP/2).
pub fn generate(http1_only: bool) -> Result<Tls, String> {
    let e = |e: rcgen::Error| e.to_string();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "sandbox-apiserver CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca_params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    ca_params.not_after = rcgen::date_time_ymd(2099, 12, 31);
    let ca_key = KeyPair::generate().map_err(e)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(e)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .map_err(e)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "sandbox-apiserver");
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2099, 12, 31);
    let key = KeyPair::generate().map_err(e)?;
    let cert = params.signed_by(&key, &issuer).map_err(e)?;

    let chain = vec![CertificateDer::from(cert.der().to_vec())];
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = if http1_only {
        vec![b"http/1.1".to_vec()]
    } else {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    };
    Ok(Tls {
        ca_pem: ca_cert.pem(),
        ca_der: ca_cert.der().to_vec(),
        config: Arc::new(config),
    })
}

/// A self-signed client certificate and its private key (PEM), for kubeconfigs that carry
/// `client-certificate-data`/`client-key-data`. The sandbox does not ask for client
/// certificates (identities are bearer tokens), so a client offers it to no one; tests use it
/// to check that certificate and key bytes never reach any output.
pub fn client_certificate(common_name: &str) -> Result<(String, String), String> {
    let e = |e: rcgen::Error| e.to_string();
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2099, 12, 31);
    let key = KeyPair::generate().map_err(e)?;
    let cert = params.self_signed(&key).map_err(e)?;
    Ok((cert.pem(), key.serialize_pem()))
}
