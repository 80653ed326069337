"""Refused here: see unsupported.py for why."""
from .unsupported import refusing

translate_state_dict_to_hf_bert = refusing("bert", "translate_state_dict_to_hf_bert")
translate_hf_state_dict_to_smdistributed_bert = refusing("bert", "translate_hf_state_dict_to_smdistributed_bert")
