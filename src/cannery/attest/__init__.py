"""Supply chain: provenance, SBOM and signatures, attached as OCI 1.1 referrers."""
