"""Refused here: see unsupported.py for why."""
from .unsupported import refusing

translate_state_dict_to_hf_roberta = refusing("roberta", "translate_state_dict_to_hf_roberta")
translate_hf_state_dict_to_smdistributed_roberta = refusing("roberta",
                                                            "translate_hf_state_dict_to_smdistributed_roberta")
