"""Refused here: see unsupported.py for why."""
from .unsupported import refusing

translate_state_dict_to_hf_gptj = refusing("gptj", "translate_state_dict_to_hf_gptj")
translate_hf_state_dict_to_smdistributed_gptj = refusing("gptj", "translate_hf_state_dict_to_smdistributed_gptj")
