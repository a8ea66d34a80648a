/*
 * handlers: every Bot API method handler of the emulator, for the one table in methods.c
 * (internal). A handler runs with e->mu held, writes its result value into r->w and returns
 * 0, or returns emu_fail's -1 with the error set.
 */
#ifndef TGKIT_EMULATOR_HANDLERS_H
#define TGKIT_EMULATOR_HANDLERS_H

#include "emulator/api.h"

/* messages and updates (api_msg.c), webhooks (webhook.c) */
int emu_h_get_me(emu_req *r);
int emu_h_true(emu_req *r);
int emu_h_get_updates(emu_req *r);
int emu_webhook_set(emu_req *r);
int emu_webhook_delete(emu_req *r);
int emu_webhook_info(emu_req *r);
int emu_h_send_message(emu_req *r);
int emu_h_forward_message(emu_req *r);
int emu_h_copy_message(emu_req *r);
int emu_h_send_chat_action(emu_req *r);
int emu_h_edit_message_text(emu_req *r);
int emu_h_edit_message_caption(emu_req *r);
int emu_h_edit_message_reply_markup(emu_req *r);
int emu_h_delete_message(emu_req *r);
int emu_h_delete_messages(emu_req *r);
int emu_h_pin_chat_message(emu_req *r);
int emu_h_unpin_chat_message(emu_req *r);
int emu_h_unpin_all_chat_messages(emu_req *r);
int emu_h_answer_callback_query(emu_req *r);
int emu_h_answer_inline_query(emu_req *r);

/* chats, members, commands (api_chat.c) */
int emu_h_get_chat(emu_req *r);
int emu_h_get_chat_member(emu_req *r);
int emu_h_get_chat_member_count(emu_req *r);
int emu_h_get_chat_administrators(emu_req *r);
int emu_h_ban_chat_member(emu_req *r);
int emu_h_unban_chat_member(emu_req *r);
int emu_h_restrict_chat_member(emu_req *r);
int emu_h_promote_chat_member(emu_req *r);
int emu_h_leave_chat(emu_req *r);
int emu_h_approve_chat_join_request(emu_req *r);
int emu_h_decline_chat_join_request(emu_req *r);
int emu_h_set_chat_title(emu_req *r);
int emu_h_set_chat_description(emu_req *r);
int emu_h_set_my_commands(emu_req *r);
int emu_h_get_my_commands(emu_req *r);
int emu_h_delete_my_commands(emu_req *r);

/* files and media (api_media.c) */
int emu_h_send_media_group(emu_req *r);
int emu_h_get_file(emu_req *r);
int emu_h_send_photo(emu_req *r);
int emu_h_send_document(emu_req *r);
int emu_h_send_audio(emu_req *r);
int emu_h_send_video(emu_req *r);
int emu_h_send_voice(emu_req *r);
int emu_h_send_animation(emu_req *r);
int emu_h_send_location(emu_req *r);
int emu_h_send_contact(emu_req *r);
int emu_h_send_dice(emu_req *r);

/* The handler of method (exact Bot API name), or NULL when it is not emulated. */
emu_handler emu_find_handler(const char *name);

#endif
