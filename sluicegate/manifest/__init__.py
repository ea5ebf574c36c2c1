"""The manifest edge codec: Kueue-style YAML/JSON documents <-> model values.

This is where raw dicts stop.  ``loader`` turns files into raw documents,
``decode`` validates a document the way Kueue's CRD schema and webhooks
would and returns a frozen model object, ``encode`` writes one back.  Every
field a manifest holds is either understood or reported by its path: a field
sluicegate cannot honour is an error, never silently dropped.  The scheduler
and the rest of the core never see the dicts.
"""

from sluicegate.manifest.decode import Decoded, decode, decode_all, find_cohort_cycle
from sluicegate.manifest.encode import encode, object_ref
from sluicegate.manifest.errors import FieldError, ManifestError, ManifestErrors
from sluicegate.manifest.loader import RawDocument, load_documents, parse_text

__all__ = [
    "Decoded",
    "FieldError",
    "ManifestError",
    "ManifestErrors",
    "RawDocument",
    "decode",
    "decode_all",
    "encode",
    "find_cohort_cycle",
    "load_documents",
    "object_ref",
    "parse_text",
]
