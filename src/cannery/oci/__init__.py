"""cannery's OCI distribution client: references, credentials, the client, publishing."""

from cannery.oci.auth import Credentials
from cannery.oci.client import AuthError, DigestMismatch, NotFound, OCIClient, http_reason
from cannery.oci.manifest import DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST, Descriptor
from cannery.oci.publish import merge_index, move_tags, push_image_dir
from cannery.oci.reference import Reference

__all__ = [
    "DOCKER_MANIFEST",
    "OCI_INDEX",
    "OCI_MANIFEST",
    "AuthError",
    "Credentials",
    "Descriptor",
    "DigestMismatch",
    "NotFound",
    "OCIClient",
    "Reference",
    "http_reason",
    "merge_index",
    "move_tags",
    "push_image_dir",
]
